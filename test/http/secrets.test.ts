import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { newApiKey } from '../../src/domain/api-keys.js';
import { BetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import { after, backends, before, type TestDatabase, test } from '../support/backends.js';
import {
  type CliResult,
  killAllCliProcesses,
  poll,
  runInProcess,
  type ServeProcess,
  startServe,
} from '../support/cli.js';
import { queryDatabase } from '../support/db-inspect.js';

/**
 * Secrets stay secret through a whole run of the real `petstore serve`, logging at trace level: the
 * first start's key, a key made with `keys create` and then revoked, a key with one scope and an expiry
 * (refused 403 beyond its scope), an expired key, and keys that were never valid are used in passing
 * and failing requests, an internal error is forced by dropping the pets table under
 * the running service, and then:
 * - no key, no key hash and no Authorization value is anywhere in stdout or stderr, apart from the one
 *   printout of the first key on first start, nor in any answer, nor in `keys list` and its --json;
 * - the api_keys rows, read straight from the database, hold SHA-256 hashes and never a secret;
 * - every response carries X-Content-Type-Options: nosniff and no Server/X-Powered-By fingerprint;
 * - the 500s reveal nothing of the service's insides.
 * (test/cli/serve.test.ts covers the info-level log of a run; test/http/errors.test.ts the 500s of a
 * closed database connection.)
 */

const KEY = /pst_[A-Za-z0-9_-]{43}/;
const sha256 = (secret: string) => createHash('sha256').update(secret).digest('hex');
const FINGERPRINT_HEADERS = ['server', 'x-powered-by', 'x-aspnet-version', 'x-runtime', 'x-generator', 'via'];

interface Exchange {
  what: string;
  status: number;
  headers: Headers;
  body: string;
}

after(() => killAllCliProcesses());

/** Drops the pets table under the running service, straight in the database. */
async function dropPetsTable(url: string): Promise<void> {
  if (url.startsWith('sqlite:')) {
    const db = new BetterSqlite3(url.slice('sqlite:'.length));
    try {
      db.exec('DROP TABLE pets');
    } finally {
      db.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('DROP TABLE pets CASCADE');
  } finally {
    await client.end();
  }
}

for (const backend of backends) {
  backend.describe(`secrets through a whole run at LOG_LEVEL=trace (${backend.name})`, () => {
    let database: TestDatabase;
    let server: ServeProcess | undefined;
    let result: CliResult;
    let firstKey: string;
    let createdKey: string;
    let scopedKey: string;
    /** Stored with an expiry already past: refused like an unknown key. */
    const expired = newApiKey('expired', new Date('2026-01-01T00:00:00Z'), {
      expiresAt: new Date('2026-01-02T00:00:00Z'),
    });
    let listings: CliResult[];
    const neverValid = `pst_${randomBytes(32).toString('base64url')}`;
    const exchanges: Exchange[] = [];
    /** Every Authorization value sent during the run. */
    const authorizations: string[] = [];

    async function call(
      what: string,
      path: string,
      init: RequestInit & { auth?: string } = {},
    ): Promise<Exchange> {
      const headers: Record<string, string> = { ...(init.headers as Record<string, string>) };
      if (init.auth !== undefined) {
        headers.authorization = init.auth;
        authorizations.push(init.auth);
      }
      const res = await fetch(`${server?.url}${path}`, { ...init, headers });
      const exchange = { what, status: res.status, headers: res.headers, body: await res.text() };
      exchanges.push(exchange);
      return exchange;
    }
    const json = { 'content-type': 'application/json' };

    before(async () => {
      database = await backend.create();
      server = await startServe({
        DATABASE_URL: database.url,
        LOG_LEVEL: 'trace',
        // Every status below is exact: no throttling or load shedding (each has its own tests).
        RATE_LIMIT_PER_SECOND: '0',
        OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
      });
      firstKey = await server.waitFor('the first key printout', () => KEY.exec(server?.stderr ?? '')?.[0]);

      const createdRun = await runInProcess(['keys', 'create', '--name', 'secrets-test'], {
        DATABASE_URL: database.url,
      });
      assert.equal(createdRun.code, 0, createdRun.stderr);
      createdKey = createdRun.stdout.trim();
      assert.match(createdKey, KEY);
      const scopedRun = await runInProcess(
        ['keys', 'create', '--name', 'scoped', '--scopes', 'pets:read', '--expires-in', '30d'],
        { DATABASE_URL: database.url },
      );
      assert.equal(scopedRun.code, 0, scopedRun.stderr);
      scopedKey = scopedRun.stdout.trim();
      assert.match(scopedKey, KEY);
      const storage = await database.open();
      try {
        await storage.apiKeys.insert(expired.record);
      } finally {
        await storage.close();
      }

      const bearer = (key: string) => `Bearer ${key}`;
      const ok = await call('create', '/v1/pets', {
        method: 'POST',
        auth: bearer(firstKey),
        headers: json,
        body: JSON.stringify({ name: 'Secretive', categoryId: 1 }),
      });
      assert.equal(ok.status, 201);
      const steps: [string, string, RequestInit & { auth?: string }, number][] = [
        ['list', '/v1/pets?limit=5', { auth: bearer(firstKey) }, 200],
        ['get', '/v1/pets/1', { auth: bearer(createdKey) }, 200],
        ['list, lower-case scheme', '/v1/pets', { auth: `bearer ${createdKey}` }, 200],
        [
          'bad body',
          '/v1/pets',
          { method: 'POST', auth: bearer(firstKey), headers: json, body: '{"name":1}' },
          400,
        ],
        ['bad JSON', '/v1/pets', { method: 'POST', auth: bearer(createdKey), headers: json, body: '{' }, 400],
        ['unknown pet', '/v1/pets/999', { auth: bearer(firstKey) }, 404],
        ['never-valid key', '/v1/pets', { auth: bearer(neverValid) }, 401],
        [
          'key with a typo',
          '/v1/pets',
          { auth: bearer(`${firstKey.slice(0, -1)}${firstKey.endsWith('x') ? 'y' : 'x'}`) },
          401,
        ],
        [
          'Basic scheme',
          '/v1/pets',
          { auth: `Basic ${Buffer.from(`me:${firstKey}`).toString('base64')}` },
          401,
        ],
        ['key without scheme', '/v1/pets', { auth: firstKey }, 401],
        ['key sent twice in one value', '/v1/pets', { auth: `Bearer ${createdKey} ${createdKey}` }, 401],
        ['no key', '/v1/pets', {}, 401],
        ['scoped key reads', '/v1/pets', { auth: bearer(scopedKey) }, 200],
        [
          'scoped key writes',
          '/v1/pets',
          { method: 'POST', auth: bearer(scopedKey), headers: json, body: '{"name":"No","categoryId":1}' },
          403,
        ],
        [
          'scoped key writes a bad body',
          '/v1/pets',
          { method: 'POST', auth: bearer(scopedKey), headers: json, body: '{"name":' },
          403,
        ],
        ['scoped key reads orders', '/v1/store/orders?limit=5', { auth: bearer(scopedKey) }, 403],
        ['expired key', '/v1/pets', { auth: bearer(expired.secret) }, 401],
        [
          'expired key writes',
          '/v1/store/orders',
          { method: 'POST', auth: bearer(expired.secret), headers: json, body: '{"petId":1}' },
          401,
        ],
        // Keys put in the URL: refused, and their values never logged.
        ['key in the query', `/v1/pets?api_key=${firstKey}`, {}, 401],
        ['key as a query parameter name', `/v1/pets?${neverValid}`, {}, 401],
        [
          'key in the query beside a valid key',
          `/v1/pets?limit=5&access_token=${createdKey}&status=sold`,
          { auth: bearer(firstKey) },
          400,
        ],
        [
          'key in the query of an unknown path',
          `/v1/nothing?key=${firstKey}`,
          { auth: bearer(firstKey) },
          404,
        ],
        ['unknown path with key', '/v1/nothing', { auth: bearer(firstKey) }, 404],
        ['wrong method with key', '/v1/pets', { method: 'DELETE', auth: bearer(firstKey) }, 405],
        ['openapi', '/v1/openapi.json', {}, 200],
        ['docs', '/docs', {}, 200],
        ['metrics', '/metrics', {}, 200],
        ['healthz', '/healthz', {}, 200],
      ];
      for (const [what, path, init, status] of steps) {
        const exchange = await call(what, path, init);
        assert.equal(exchange.status, status, `${what}: ${exchange.body}`);
      }

      // Revoke the created key from another process; the running service refuses it from then on.
      const listed = await runInProcess(['keys', 'list', '--json'], { DATABASE_URL: database.url });
      const id = (JSON.parse(listed.stdout) as { id: string; name: string }[]).find(
        (k) => k.name === 'secrets-test',
      )?.id;
      assert.ok(id);
      const revoked = await runInProcess(['keys', 'revoke', id], { DATABASE_URL: database.url });
      assert.equal(revoked.code, 0, revoked.stderr);
      await poll('the revoked key to be refused', async () => {
        const exchange = await call('revoked key', '/v1/pets', { auth: bearer(createdKey) });
        return exchange.status === 401 ? exchange : undefined;
      });

      // Before the pets table goes (SQLite prepares its statements when the database is opened).
      listings = [
        await runInProcess(['keys', 'list'], { DATABASE_URL: database.url }),
        await runInProcess(['keys', 'list', '--json'], { DATABASE_URL: database.url }),
      ];

      // An internal error: the pets table disappears under the running service.
      await dropPetsTable(database.url);
      for (const [what, path, init] of [
        ['500 list', '/v1/pets?status=sold&limit=3', { auth: bearer(firstKey) }],
        ['500 get', '/v1/pets/1', { auth: bearer(firstKey) }],
        [
          '500 create',
          '/v1/pets',
          { method: 'POST', auth: bearer(firstKey), headers: json, body: '{"name":"Lost","categoryId":2}' },
        ],
      ] as const) {
        const exchange = await call(what, path, init);
        assert.equal(exchange.status, 500, `${what}: ${exchange.body}`);
      }

      server.signal('SIGTERM');
      result = await server.exitStatus();
    });
    after(async () => {
      await server?.kill();
      await database?.drop();
    });

    test('when the run is over, then the first key appears only in the first-start printout on stderr', () => {
      assert.equal(result.code, 0);
      const printout = /\nNo API key existed[\s\S]*?Manage keys with: [^\n]*\n/.exec(result.stderr)?.[0];
      assert.ok(printout, `no first-start printout in stderr:\n${result.stderr}`);
      assert.equal(printout.split(firstKey).length - 1, 2, 'the key and the curl line');
      assert.equal(
        result.stderr.split(firstKey).length - 1,
        2,
        'the first key is printed once (key and curl line)',
      );
      assert.equal(result.stdout.includes(firstKey), false, 'the first key is in stdout');
    });

    test('when the run is over, then no key, part of a key or Authorization value is in stdout or stderr', () => {
      const stderr = result.stderr.replace(/\nNo API key existed[\s\S]*?Manage keys with: [^\n]*\n/, '');
      const logs = `${result.stdout}\n${stderr}`;
      // It is a trace-level log of every request, the 500s' errors included.
      assert.ok(result.stdout.split('\n').length > exchanges.length, 'the log is there');
      assert.match(result.stdout, /"level":50/, 'the 500s were logged as errors');
      for (const secret of [firstKey, createdKey, scopedKey, expired.secret, neverValid]) {
        assert.equal(logs.includes(secret), false, `a key is in the logs:\n${logs}`);
        assert.equal(logs.includes(sha256(secret)), false, 'a key hash is in the logs');
        // The random part alone, and any half of it.
        const body = secret.slice('pst_'.length);
        for (const part of [body, body.slice(0, 22), body.slice(21)])
          assert.equal(logs.includes(part), false, `part of a key is in the logs: ${part}`);
      }
      for (const value of authorizations) {
        const token = value.split(' ').pop() as string;
        assert.equal(logs.includes(value), false, `an Authorization value is in the logs: ${value}`);
        assert.equal(logs.includes(token), false, `an Authorization token is in the logs: ${token}`);
      }
      assert.doesNotMatch(logs, /bearer|basic /i);
      assert.doesNotMatch(logs, /"authorization"\s*:\s*"(?!\[redacted\])/i);
    });

    test('when the run is over, then request lines name each key only by its id (apiKeyId, from keys list --json), with the client address and the error code, and no field holds a key', () => {
      const listed = JSON.parse(listings[1]?.stdout ?? '[]') as { id: string }[];
      const ids = new Set(listed.map((key) => key.id));
      assert.equal(ids.size, 4, 'four stored keys');
      const requests = result.stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((line) => line.msg === 'request');
      assert.ok(requests.length >= exchanges.length, `${requests.length} request lines`);
      const named = requests.filter((line) => line.apiKeyId !== undefined);
      assert.ok(named.length > 5, 'authenticated requests carry their key id');
      for (const line of named)
        assert.ok(ids.has(line.apiKeyId as string), `${line.apiKeyId} is a listed id`);
      // A refused key is not named: the line of a 401 has no key id, but its code.
      for (const line of requests.filter((l) => l.statusCode === 401)) {
        assert.equal(line.apiKeyId, undefined);
        assert.equal(line.code, 'unauthorized');
      }
      for (const line of requests.filter((l) => l.statusCode === 500)) {
        assert.equal(line.level, 50);
        assert.equal(line.code, 'internal_error');
      }
      for (const line of requests) assert.equal(line.clientAddress, '127.0.0.1');
      const values = JSON.stringify(
        requests.map(({ apiKeyId, clientAddress, code }) => [apiKeyId, clientAddress, code]),
      );
      for (const secret of [firstKey, createdKey, scopedKey, expired.secret, neverValid]) {
        for (const part of [secret.slice('pst_'.length, 20), sha256(secret).slice(0, 16)])
          assert.equal(values.includes(part), false, `a key or its hash is in a new field: ${part}`);
      }
    });

    test('when keys were sent in query strings, then the log keeps the values of the parameters the operation defines and redacts the rest', () => {
      const urls = result.stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => (JSON.parse(line) as { url?: string }).url)
        .filter((url): url is string => url?.includes('?') === true);
      for (const expected of [
        '/v1/pets?api_key=[redacted]',
        '/v1/pets?[redacted]',
        '/v1/pets?limit=5&access_token=[redacted]&status=sold',
        '/v1/nothing?key=[redacted]',
        '/v1/pets?limit=5',
        '/v1/pets?status=sold&limit=3',
      ])
        assert.ok(urls.includes(expected), `${expected} is not among the logged URLs:\n${urls.join('\n')}`);
    });

    test('when keys were created, scoped, expired and revoked, then the api_keys rows hold only SHA-256 hashes and hints, never a secret', async () => {
      const rows = await queryDatabase(database.url, 'SELECT * FROM api_keys ORDER BY created_at');
      assert.equal(rows.length, 4);
      const hashes = rows.map((row) => row.hash);
      assert.deepEqual(hashes.sort(), [firstKey, createdKey, scopedKey, expired.secret].map(sha256).sort());
      const dump = JSON.stringify(rows, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
      for (const secret of [firstKey, createdKey, scopedKey, expired.secret]) {
        const body = secret.slice('pst_'.length);
        for (const part of [secret, body, body.slice(0, 22), body.slice(21)])
          assert.equal(dump.includes(part), false, `a secret is stored: ${dump}`);
      }
      for (const row of rows) {
        assert.match(String(row.hash), /^[0-9a-f]{64}$/);
        assert.match(String(row.hint), /^[A-Za-z0-9_-]{4}$/);
      }
      assert.equal(rows.filter((row) => row.revoked_at !== null).length, 1);
    });

    test('when keys list and keys list --json run after it all, then they show no key and no hash, only the last four characters', () => {
      for (const listing of listings) {
        assert.equal(listing.code, 0, listing.stderr);
        const output = `${listing.stdout}\n${listing.stderr}`;
        for (const secret of [firstKey, createdKey, scopedKey, expired.secret]) {
          const body = secret.slice('pst_'.length);
          for (const part of [secret, body, body.slice(0, 22), body.slice(21), sha256(secret)])
            assert.equal(output.includes(part), false, `a secret or hash is listed: ${output}`);
          assert.ok(output.includes(`pst_…${secret.slice(-4)}`), 'each key is listed by its last four');
        }
      }
      assert.match(listings[0]?.stdout ?? '', /\sscoped\s+pst_…\S{4}\s+pets:read\s/);
      assert.match(listings[0]?.stdout ?? '', /\sexpired\s+pst_…\S{4}\s+all\s.*\sexpired$/m);
    });

    test('when any answer of the run is looked at, then no key, hash or Authorization value is in it, and each 403 names only the scope', () => {
      const secrets = [firstKey, createdKey, scopedKey, expired.secret, neverValid];
      for (const { what, body, headers } of exchanges) {
        const answer = `${JSON.stringify([...headers])}${body}`;
        for (const secret of secrets) {
          assert.equal(answer.includes(secret.slice('pst_'.length)), false, `${what} carries a key`);
          assert.equal(answer.includes(sha256(secret)), false, `${what} carries a key hash`);
        }
        assert.doesNotMatch(answer, /bearer pst_|basic /i);
      }
      const forbidden = exchanges.filter((e) => e.status === 403);
      assert.equal(forbidden.length, 3);
      for (const { body } of forbidden)
        assert.match(
          JSON.parse(body).message,
          /^this API key does not have the scope (pets:write|orders:read), which this operation needs$/,
        );
    });

    test('when any response of the run is looked at, then it carries nosniff and no Server or X-Powered-By fingerprint', () => {
      assert.ok(exchanges.length >= 20);
      for (const { what, headers } of exchanges) {
        assert.equal(headers.get('x-content-type-options'), 'nosniff', `${what}: X-Content-Type-Options`);
        for (const name of FINGERPRINT_HEADERS) assert.equal(headers.get(name), null, `${what}: ${name}`);
      }
    });

    test('when the pets table was dropped under the running service, then each 500 is the bare internal_error body', () => {
      const failures = exchanges.filter((e) => e.what.startsWith('500'));
      assert.equal(failures.length, 3);
      for (const { what, body, headers } of failures) {
        assert.deepEqual(
          JSON.parse(body),
          { code: 'internal_error', message: 'an unexpected error occurred', status: 500 },
          what,
        );
        assert.equal(headers.get('content-type'), 'application/json; charset=utf-8');
        assert.doesNotMatch(
          body,
          /pets|table|relation|sqlite|postgres|SQL|select|insert|\bat \S+:\d+|\/(tmp|work|home|usr)\//i,
        );
        assert.equal(body.includes(database.url), false);
      }
    });
  });
}
