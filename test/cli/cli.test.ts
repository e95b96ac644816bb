import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, type TestContext, test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { describeConfig } from '../../src/config/config.js';
import { firstKeyMessage } from '../../src/server.js';
import { BetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import { SQLITE_MIGRATIONS } from '../../src/storage/sqlite/migrations.js';
import { VERSION } from '../../src/version.js';
import {
  type CliResult,
  jsonLines,
  killAllCliProcesses,
  migratedTempDatabase,
  oneLineFailure,
  poll,
  runCli,
  runInProcess,
  type ServeProcess,
  startServe,
  type TempDatabase,
  tempDatabase,
} from '../support/cli.js';
import { freePort } from '../support/free-port.js';

/** A key as `keys create` and the first start print it: the prefix and 32 random bytes, base64url. */
const KEY = /^pst_[A-Za-z0-9_-]{43}$/;
/** A key supplied through PETSTORE_API_KEYS. */
const ENV_KEY = 'env-key-0123456789abcdef';
/** The version package.json gives, which the executable reports. */
const PACKAGE_VERSION: string = JSON.parse(
  readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
).version;

interface Pet {
  id: number;
  name: string;
  categoryId: number;
  status: string;
}

interface ListedKey {
  id: string;
  name: string;
  key: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  revokedAt: string | null;
  status: 'active' | 'expired' | 'revoked';
}

after(() => killAllCliProcesses());

/** A database file for this test that does not exist yet, removed when it ends. */
function newDatabase(t: TestContext): TempDatabase {
  const db = tempDatabase();
  t.after(() => db.remove());
  return db;
}

/** A fresh database for this test, its schema in place (as `migrate` leaves it), removed when it ends. */
async function database(t: TestContext): Promise<TempDatabase> {
  const db = await migratedTempDatabase();
  t.after(() => db.remove());
  return db;
}

/** A failed run of a command that opened the database: `database: <path>` first, then one line saying what failed. */
function failureAfterOpening(result: CliResult, db: TempDatabase): string {
  const [opened, ...rest] = result.stderr.split('\n');
  assert.equal(opened, `database: ${db.path}`);
  return oneLineFailure({ ...result, stderr: rest.join('\n') });
}

/** `petstore serve` on this database; killed when the test ends, whatever happens. */
async function serve(t: TestContext, env: Record<string, string>): Promise<ServeProcess> {
  const server = await startServe(env);
  t.after(() => server.kill());
  return server;
}

async function createKey(db: TempDatabase, name: string): Promise<string> {
  const result = await runInProcess(['keys', 'create', '--name', name], { DATABASE_URL: db.url });
  assert.equal(result.code, 0, result.stderr);
  const secret = result.stdout.trim();
  assert.match(secret, KEY);
  return secret;
}

async function listKeys(db: TempDatabase): Promise<ListedKey[]> {
  const result = await runInProcess(['keys', 'list', '--json'], { DATABASE_URL: db.url });
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout) as ListedKey[];
}

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

async function getPets(url: string, key: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${url}/v1/pets?limit=100`, { headers: auth(key) });
  return { status: res.status, body: await res.json() };
}

async function createPet(url: string, key: string, name: string, categoryId: number): Promise<Response> {
  return fetch(`${url}/v1/pets`, {
    method: 'POST',
    headers: { ...auth(key), 'content-type': 'application/json' },
    body: JSON.stringify({ name, categoryId }),
  });
}

/** Lines of a section of commander's help, e.g. "Commands:", up to the next blank line. */
function helpSection(help: string, title: string): string[] {
  const start = help.split('\n').indexOf(title);
  assert.ok(start >= 0, `no "${title}" section in:\n${help}`);
  const lines = help.split('\n').slice(start + 1);
  const end = lines.indexOf('');
  return end < 0 ? lines : lines.slice(0, end);
}

const port = (server: ServeProcess) => Number(new URL(server.url).port);

/** True once the port refuses connections. */
function refusesConnections(portNumber: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const socket = connect(portNumber, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNREFUSED') resolve(true);
      // Caught in the listening socket's backlog as it closed: look again, until it is refused.
      else if (error.code === 'ECONNRESET') resolve(false);
      else reject(error);
    });
  });
}

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A hand-driven HTTP/1.1 connection, to hold a request open across a signal. */
class RawConnection {
  readonly #socket: Socket;
  data = '';
  closed = false;

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.data += chunk;
    });
    socket.on('close', () => {
      this.closed = true;
    });
    socket.on('error', () => undefined);
  }

  static async open(t: TestContext, portNumber: number): Promise<RawConnection> {
    const socket = connect(portNumber, '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const connection = new RawConnection(socket);
    t.after(() => connection.destroy());
    return connection;
  }

  write(text: string): void {
    this.#socket.write(text);
  }

  destroy(): void {
    this.#socket.destroy();
  }

  /** The final (non-1xx) responses that have fully arrived, in order. */
  responses(): RawResponse[] {
    const responses: RawResponse[] = [];
    let rest = this.data;
    for (;;) {
      const headEnd = rest.indexOf('\r\n\r\n');
      if (headEnd < 0) return responses;
      const [statusLine = '', ...headerLines] = rest.slice(0, headEnd).split('\r\n');
      const status = Number(statusLine.split(' ')[1]);
      rest = rest.slice(headEnd + 4);
      if (status >= 100 && status < 200) continue;
      const headers: Record<string, string> = {};
      for (const line of headerLines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      if (Buffer.byteLength(rest) < length) return responses;
      const body = Buffer.from(rest).subarray(0, length).toString();
      responses.push({ status, headers, body });
      rest = Buffer.from(rest).subarray(length).toString();
    }
  }

  /** The first final response, once it has fully arrived. */
  response(): RawResponse | undefined {
    return this.responses()[0];
  }
}

/**
 * Begins `POST /v1/pets` and stops halfway through its body. It asks for `100 Continue` and waits for
 * it: the service sends it once the request is authenticated, so the request is known to be in flight.
 */
async function beginCreatePet(
  t: TestContext,
  server: ServeProcess,
  pet: { name: string; categoryId: number },
  connectionHeader: 'close' | 'keep-alive',
): Promise<{ connection: RawConnection; finish: (pipelined?: string) => void }> {
  const body = JSON.stringify(pet);
  const connection = await RawConnection.open(t, port(server));
  connection.write(
    [
      'POST /v1/pets HTTP/1.1',
      'Host: 127.0.0.1',
      `Authorization: Bearer ${ENV_KEY}`,
      'Content-Type: application/json',
      `Content-Length: ${Buffer.byteLength(body)}`,
      'Expect: 100-continue',
      `Connection: ${connectionHeader}`,
      '',
      '',
    ].join('\r\n'),
  );
  await poll('100 Continue', () =>
    connection.data.startsWith('HTTP/1.1 100 Continue\r\n') ? true : undefined,
  );
  connection.write(body.slice(0, 5));
  return { connection, finish: (more = '') => connection.write(body.slice(5) + more) };
}

function integrityCheck(db: TempDatabase): unknown {
  const sqlite = new BetterSqlite3(db.path, { readonly: true, fileMustExist: true });
  try {
    return sqlite.pragma('integrity_check', { simple: true });
  } finally {
    sqlite.close();
  }
}

describe('petstore help', { concurrency: 4 }, () => {
  test('when run with --version, then it prints the version of package.json and exits 0', async () => {
    // The executable itself, once: the other commands' parsing and output run in this process.
    const result = await runCli(['--version']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, `${PACKAGE_VERSION}\n`);
    assert.equal(VERSION, PACKAGE_VERSION);
  });

  test('when run with --help, then it lists serve, keys and migrate, each with a one-line purpose, and exits 0', async () => {
    const result = await runInProcess(['--help']);
    assert.equal(result.code, 0, result.stderr);
    const commands = helpSection(result.stdout, 'Commands:');
    for (const name of ['serve', 'keys', 'migrate']) {
      const line = commands.find((l) => l.trimStart().startsWith(`${name} `));
      assert.ok(line, `${name} is not listed:\n${result.stdout}`);
      assert.match(line, new RegExp(`^\\s+${name}(\\s+\\[options\\])?\\s{2,}\\S.{9,}$`));
    }
    // One line each: every line of the section starts a command, none continues a wrapped purpose.
    for (const line of commands) {
      assert.match(
        line,
        /^ {2}\S+( \S+)*\s{2,}\S/,
        `a purpose spans more than one line:\n${commands.join('\n')}`,
      );
    }
  });

  test('when run with keys --help, then it lists create, list and revoke and exits 0', async () => {
    const result = await runInProcess(['keys', '--help']);
    assert.equal(result.code, 0, result.stderr);
    const commands = helpSection(result.stdout, 'Commands:');
    for (const name of ['create', 'list', 'revoke']) {
      assert.ok(
        commands.some((line) => new RegExp(`^\\s+${name}\\b.*\\s{2,}\\S`).test(line)),
        `${name} is not listed with a purpose:\n${result.stdout}`,
      );
    }
  });

  test('when serve is given a --role that is not api, deliver or all, then it exits non-zero naming the three, and --help describes each', async () => {
    const wrong = await runInProcess(['serve', '--role', 'worker']);
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, /--role <role>.*'worker' is invalid.*all, api, deliver/s);
    const help = await runInProcess(['serve', '--help']);
    // Commander wraps the description: compared with its lines joined.
    const options = help.stdout.replace(/\n\s+/g, ' ');
    assert.match(
      options,
      /--role <role> +what the process does: "api" serves the API and delivers no webhook; "deliver" delivers webhooks and answers only \/healthz, \/readyz and \/metrics; "all" does both \(choices: "all", "api", "deliver", default: "all"\)/,
    );
  });

  test('when run with serve --help, then it lists every environment variable with its meaning and exits 0', async () => {
    const result = await runInProcess(['serve', '--help']);
    assert.equal(result.code, 0, result.stderr);
    const variables = helpSection(result.stdout, 'Environment variables:');
    for (const { name } of describeConfig()) {
      assert.ok(
        variables.some((line) => new RegExp(`^\\s+${name}\\s+\\S`).test(line)),
        `${name} is not listed:\n${result.stdout}`,
      );
    }
    // Every description starts in one column, the longest name included.
    const columns = new Set(
      describeConfig().map(({ name }) => {
        const line = variables.find((l) => new RegExp(`^\\s+${name}\\s`).test(l)) as string;
        return (
          line.indexOf(name) +
          name.length +
          (/^\s*/.exec(line.slice(line.indexOf(name) + name.length))?.[0].length ?? 0)
        );
      }),
    );
    assert.equal(columns.size, 1, `descriptions start in ${columns.size} columns:\n${variables.join('\n')}`);
    assert.match(result.stdout, /PORT\s+.*\(default: 3000\)/);
    assert.match(result.stdout, /DATABASE_URL\s+.*\(default: "sqlite:\.\/data\/petstore\.db"\)/);
  });
});

describe('petstore keys', { concurrency: 4 }, () => {
  test('when keys create --name ci runs, then it prints one pst_ key on stdout and exits 0', async (t) => {
    const db = await database(t);
    const result = await runInProcess(['keys', 'create', '--name', 'ci'], { DATABASE_URL: db.url });
    assert.equal(result.code, 0, result.stderr);
    const lines = result.stdout.split('\n');
    assert.equal(lines.length, 2, `stdout: ${JSON.stringify(result.stdout)}`);
    assert.equal(lines[1], '');
    assert.match(lines[0] as string, KEY);
    assert.equal(result.stderr.includes(lines[0] as string), false);
    const [listed] = await listKeys(db);
    assert.equal(listed?.name, 'ci');
  });

  test('when keys list runs, then it shows each key id, name and pst_…last4, never the secret', async (t) => {
    const db = await database(t);
    const secret = await createKey(db, 'ci');
    const [record] = await listKeys(db);
    assert.ok(record);
    const result = await runInProcess(['keys', 'list'], { DATABASE_URL: db.url });
    assert.equal(result.code, 0, result.stderr);
    const [header, row, ...rest] = result.stdout.trimEnd().split('\n');
    assert.deepEqual(rest, []);
    assert.match(header ?? '', /^ID\s+NAME\s+KEY\s+SCOPES\s+CREATED\s+EXPIRES\s+LAST USED\s+STATUS$/);
    assert.match(
      row ?? '',
      new RegExp(
        `^${record.id}\\s+ci\\s+pst_…${secret.slice(-4)}\\s+all\\s+\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}Z\\s+never\\s+never\\s+active$`,
      ),
    );
    assert.equal(result.stdout.includes(secret), false);
    assert.equal(result.stdout.includes(secret.slice(4, -4)), false);
    assert.equal(result.stdout.includes(createHash('sha256').update(secret).digest('hex')), false);
  });

  test('when keys list --json runs, then it prints every key as JSON without its secret', async (t) => {
    const db = await database(t);
    const ci = await createKey(db, 'ci');
    const deploy = await createKey(db, 'deploy');
    const result = await runInProcess(['keys', 'list', '--json'], { DATABASE_URL: db.url });
    assert.equal(result.code, 0, result.stderr);
    const keys = JSON.parse(result.stdout) as ListedKey[];
    assert.equal(keys.length, 2);
    const byName = new Map(keys.map((k) => [k.name, k]));
    for (const [name, secret] of [
      ['ci', ci],
      ['deploy', deploy],
    ] as const) {
      const key = byName.get(name);
      assert.ok(key, `${name} is not listed`);
      assert.deepEqual(Object.keys(key).sort(), [
        'createdAt',
        'expiresAt',
        'id',
        'key',
        'lastUsedAt',
        'name',
        'revokedAt',
        'scopes',
        'status',
      ]);
      assert.deepEqual(key.scopes, [
        'pets:read',
        'pets:write',
        'orders:read',
        'orders:write',
        'events:read',
        'webhooks:read',
        'webhooks:write',
      ]);
      assert.deepEqual([key.expiresAt, key.lastUsedAt, key.status], [null, null, 'active']);
      assert.match(key.id, /^\S+$/);
      assert.equal(key.key, `pst_…${secret.slice(-4)}`);
      assert.equal(new Date(key.createdAt).toISOString(), key.createdAt);
      assert.equal(key.revokedAt, null);
      assert.equal(result.stdout.includes(secret), false);
    }
    assert.notEqual(byName.get('ci')?.id, byName.get('deploy')?.id);
    assert.notEqual(ci, deploy);
  });

  test('when there is no key, then keys list says so and --json prints an empty array', async (t) => {
    const db = await database(t);
    const table = await runInProcess(['keys', 'list'], { DATABASE_URL: db.url });
    assert.equal(table.code, 0, table.stderr);
    assert.equal(table.stdout, 'no keys\n');
    assert.deepEqual(await listKeys(db), []);
  });

  test('when keys revoke <id> runs, then it exits 0 and keys list shows the key as revoked', async (t) => {
    const db = await database(t);
    await createKey(db, 'ci');
    await createKey(db, 'other');
    const id = (await listKeys(db)).find((k) => k.name === 'ci')?.id as string;
    const result = await runInProcess(['keys', 'revoke', id], { DATABASE_URL: db.url });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, new RegExp(`revoked ${id}`));

    const keys = await listKeys(db);
    const revoked = keys.find((k) => k.id === id);
    assert.ok(revoked?.revokedAt, 'revokedAt is not set');
    assert.equal(new Date(revoked.revokedAt).toISOString(), revoked.revokedAt);
    assert.equal(keys.find((k) => k.name === 'other')?.revokedAt, null);

    const table = await runInProcess(['keys', 'list'], { DATABASE_URL: db.url });
    const rows = table.stdout.split('\n');
    assert.match(rows.find((row) => row.startsWith(id)) ?? '', /\srevoked \d{4}-\d{2}-\d{2}$/);
    assert.match(rows.find((row) => /\sother\s/.test(row)) ?? '', /\sactive$/);
  });

  test("when keys are created with --scopes, --expires-in and --expires-at, then keys list shows each one's scopes, expiry and status, aligned, and --json the same", async (t) => {
    const db = await database(t);
    const before = Date.now();
    const run = (args: string[]) => runInProcess(['keys', 'create', ...args], { DATABASE_URL: db.url });
    const storefront = await run(['--name', 'storefront', '--scopes', 'pets:read,orders:write,orders:read']);
    assert.equal(storefront.code, 0, storefront.stderr);
    assert.match(
      storefront.stderr,
      new RegExp(
        `^database: ${db.path}\ncreated key_\\w+ \\(storefront; pets:read,orders:read,orders:write\\); the key is shown only this once:\n$`,
      ),
    );
    const partner = await run(['--name', 'partner', '--scopes', 'pets:read', '--expires-in', '90d']);
    assert.equal(partner.code, 0, partner.stderr);
    const season = await run(['--name', 'season', '--expires-at', '2031-03-31T02:00:00+02:00']);
    assert.equal(season.code, 0, season.stderr);
    assert.match(
      season.stderr,
      /\(season; pets:read,pets:write,orders:read,orders:write,events:read,webhooks:read,webhooks:write, expires 2031-03-31T00:00:00.000Z\)/,
    );
    for (const result of [storefront, partner, season]) assert.match(result.stdout.trim(), KEY);

    const listed = new Map((await listKeys(db)).map((key) => [key.name, key]));
    assert.deepEqual(listed.get('storefront')?.scopes, ['pets:read', 'orders:read', 'orders:write']);
    assert.equal(listed.get('storefront')?.expiresAt, null);
    assert.deepEqual(listed.get('partner')?.scopes, ['pets:read']);
    const partnerExpiry = Date.parse(listed.get('partner')?.expiresAt ?? '');
    const ninetyDays = 90 * 86_400_000;
    assert.ok(partnerExpiry >= before + ninetyDays && partnerExpiry <= Date.now() + ninetyDays, 'in 90 days');
    assert.equal(listed.get('season')?.expiresAt, '2031-03-31T00:00:00.000Z');
    for (const key of listed.values()) assert.equal(key.status, 'active');

    const table = await runInProcess(['keys', 'list'], { DATABASE_URL: db.url });
    assert.equal(table.code, 0, table.stderr);
    const lines = table.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 4);
    // Aligned: every column starts at the same place on every line.
    const header = lines[0] as string;
    for (const column of ['NAME', 'KEY', 'SCOPES', 'CREATED', 'EXPIRES', 'LAST USED', 'STATUS']) {
      const at = header.indexOf(column);
      for (const line of lines.slice(1))
        assert.match(line.slice(at - 2, at), /^ {2}$/, `${column} in ${line}`);
    }
    const row = (name: string) => lines.find((line) => line.includes(`  ${name}  `)) ?? '';
    assert.match(row('storefront'), /\spets:read,orders:read,orders:write\s.*\snever\s+never\s+active$/);
    assert.match(row('partner'), /\spets:read\s.*\s\d{4}-\d{2}-\d{2} \d{2}:\d{2}Z\s+never\s+active$/);
    assert.match(row('season'), /\sall\s.*\s2031-03-31 00:00Z\s+never\s+active$/);
  });

  for (const [args, message] of [
    [
      ['--scopes', 'pets:delete'],
      /^petstore: unknown scope pets:delete; scopes are pets:read, pets:write, orders:read, orders:write, events:read, webhooks:read, webhooks:write$/,
    ],
    [['--scopes', 'pets:read,,orders:read'], /^petstore: --scopes must be a comma-separated list of /],
    [
      ['--expires-in', '90'],
      /^petstore: --expires-in must be a whole number and a unit \(m, h, d or w\), e\.g\. 90d; got "90"$/,
    ],
    [['--expires-in', '1y'], /^petstore: --expires-in must be .*; got "1y"$/],
    [
      ['--expires-at', '2020-01-01T00:00:00Z'],
      /^petstore: the expiry 2020-01-01T00:00:00.000Z is not in the future$/,
    ],
    [['--expires-at', '2031-02-30T00:00:00Z'], /^petstore: --expires-at must be an RFC 3339 date-time/],
    [['--expires-at', '31/03/2031'], /^petstore: --expires-at must be an RFC 3339 date-time/],
    [
      ['--expires-in', '1d', '--expires-at', '2031-01-01T00:00:00Z'],
      /^petstore: give --expires-in or --expires-at, not both$/,
    ],
  ] as const) {
    test(`when keys create is given ${args.join(' ')}, then one line on stderr, a non-zero exit and no key stored`, async (t) => {
      const db = await database(t);
      const line = oneLineFailure(
        await runInProcess(['keys', 'create', '--name', 'bad', ...args], { DATABASE_URL: db.url }),
      );
      assert.match(line, message);
      assert.doesNotMatch(line, /pst_|\bat \S+:\d+/);
      assert.deepEqual(await listKeys(db), []);
    });
  }

  test('when keys revoke is given an unknown id, then it prints one clear line on stderr and exits non-zero', async (t) => {
    const db = await database(t);
    await createKey(db, 'ci');
    const result = await runInProcess(['keys', 'revoke', 'key_doesnotexist'], { DATABASE_URL: db.url });
    const line = failureAfterOpening(result, db);
    assert.match(line, /key_doesnotexist/);
    assert.doesNotMatch(line, /\bat \S+:\d+/);
    assert.equal((await listKeys(db))[0]?.revokedAt, null);
  });

  test('when a revoked key is revoked again, then it prints one line on stderr and exits non-zero', async (t) => {
    const db = await database(t);
    await createKey(db, 'ci');
    const id = (await listKeys(db))[0]?.id as string;
    assert.equal((await runInProcess(['keys', 'revoke', id], { DATABASE_URL: db.url })).code, 0);
    const line = failureAfterOpening(
      await runInProcess(['keys', 'revoke', id], { DATABASE_URL: db.url }),
      db,
    );
    assert.match(line, new RegExp(id));
  });
});

describe('petstore migrate', { concurrency: 4 }, () => {
  const latest = SQLITE_MIGRATIONS.length;

  test('when migrate runs on a new database, then it says it created the schema, where, exits 0 and the database is ready', async (t) => {
    const db = newDatabase(t);
    const result = await runInProcess(['migrate'], { DATABASE_URL: db.url });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stderr, `created the database schema (version ${latest}): ${db.path}\n`);
    assert.equal(integrityCheck(db), 'ok');
    const list = await runInProcess(['keys', 'list'], { DATABASE_URL: db.url });
    assert.equal(list.stdout, 'no keys\n');
  });

  test('when migrate runs again, then it exits 0 and keeps the data', async (t) => {
    const db = newDatabase(t);
    assert.equal((await runInProcess(['migrate'], { DATABASE_URL: db.url })).code, 0);
    const secret = await createKey(db, 'ci');
    const again = await runInProcess(['migrate'], { DATABASE_URL: db.url });
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stderr, `the database schema is already up to date (version ${latest}): ${db.path}\n`);
    const keys = await listKeys(db);
    assert.deepEqual(
      keys.map((k) => [k.name, k.key, k.revokedAt]),
      [['ci', `pst_…${secret.slice(-4)}`, null]],
    );
  });

  test('when migrate runs on a database an older version left, then it says from which version to which', async (t) => {
    const db = newDatabase(t);
    const old = new BetterSqlite3(db.path);
    old.exec(SQLITE_MIGRATIONS[0] as string);
    old.pragma('user_version = 1');
    old.close();
    const result = await runInProcess(['migrate'], { DATABASE_URL: db.url });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stderr, `migrated the database schema from version 1 to ${latest}: ${db.path}\n`);
  });
});

describe('configuration errors', { concurrency: 4 }, () => {
  for (const [variable, value] of [
    ['PORT', 'abc'],
    ['DATABASE_URL', 'mysql://x'],
    ['PUBLIC_BASE_URL', 'not-a-url'],
    ['LOG_LEVEL', 'loud'],
  ] as const) {
    test(`when ${variable}=${value}, then serve exits non-zero with one line naming ${variable}`, async (t) => {
      const db = newDatabase(t);
      const result = await runInProcess(['serve'], { DATABASE_URL: db.url, PORT: '0', [variable]: value });
      const line = oneLineFailure(result);
      assert.ok(line.includes(variable), line);
    });
  }

  test('when several values are bad, then one line says what a valid value of each looks like, without the values', async (t) => {
    const db = newDatabase(t);
    const result = await runInProcess(['serve'], {
      PORT: 'abc',
      DATABASE_URL: 'mysql://admin:hunter2@db',
      LOG_LEVEL: 'loud',
      RATE_LIMIT_BURST: '0',
    });
    assert.equal(
      oneLineFailure(result),
      'petstore: invalid configuration: PORT must be an integer from 0 to 65535; ' +
        'DATABASE_URL must be sqlite:<path>, sqlite::memory: or postgres://user@host:port/db; ' +
        'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace or silent; ' +
        'RATE_LIMIT_BURST must be an integer from 1 to 1000000',
    );
    assert.equal(existsSync(db.path), false);
  });

  test('when docs/configuration.md shows a configuration error, then it is the line the service prints', async () => {
    const doc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    const shown = /Configuration errors say [^`]*`([^`]+)`/.exec(doc.replaceAll('\n', ' '))?.[1];
    // The executable itself: the line a failed start prints, and its exit status, from the process.
    const line = oneLineFailure(await runCli(['serve'], { PORT: 'abc', DATABASE_URL: 'mysql://x' }));
    assert.equal(line, shown);
  });

  test('when DATABASE_URL is bad, then keys list exits non-zero with one line naming DATABASE_URL', async () => {
    const line = oneLineFailure(await runInProcess(['keys', 'list'], { DATABASE_URL: 'mysql://x' }));
    assert.ok(line.includes('DATABASE_URL'), line);
  });
});

describe('petstore serve', { concurrency: 4 }, () => {
  test('when it first starts on a database without keys, then it prints a new key once to stderr with a curl line that works', async (t) => {
    const db = await database(t);
    const server = await serve(t, { DATABASE_URL: db.url });
    const curl = await server.waitFor('the first key on stderr', () => {
      const match = /^ +curl -H "Authorization: Bearer (pst_[A-Za-z0-9_-]+)" (\S+)$/m.exec(server.stderr);
      return match ? { key: match[1] as string, url: match[2] as string } : undefined;
    });
    assert.match(curl.key, KEY);
    assert.equal(curl.url, `${server.url}/v1/pets`);
    // Shown on a line of its own and in the curl line, nowhere else.
    assert.match(server.stderr, new RegExp(`^ +${curl.key}$`, 'm'));
    assert.equal(server.stderr.split(curl.key).length - 1, 2);
    // The whole message, as the README quotes it (test/config/readme.test.ts), with this key and address.
    await server.waitFor('the whole message', () =>
      server.stderr.includes(`\n${firstKeyMessage(curl.key, server.url)}\n`) ? true : undefined,
    );

    const res = await fetch(curl.url, { headers: auth(curl.key) });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), []);
    assert.equal(server.stdout.includes(curl.key), false);

    const keys = await listKeys(db);
    assert.deepEqual(
      keys.map((k) => [k.key, k.revokedAt]),
      [[`pst_…${curl.key.slice(-4)}`, null]],
    );
  });

  test('when it starts, then its first log line says which version runs, on which Node.js, in which role', async (t) => {
    const db = await database(t);
    const server = await serve(t, { DATABASE_URL: db.url, PETSTORE_API_KEYS: ENV_KEY });
    const first = jsonLines(server.stdout)[0];
    assert.equal(first?.msg, `petstore ${PACKAGE_VERSION} on Node.js ${process.version} (role: all)`);
    assert.equal(first?.version, PACKAGE_VERSION);
    assert.equal(first?.node, process.version);
    assert.equal(first?.role, 'all');
  });

  test('when started with the default DATABASE_URL, then it logs the absolute path of the database it opened, under the working directory', async (t) => {
    const cwd = realpathSync(mkdtempSync(join(tmpdir(), 'petstore-cwd-')));
    t.after(() => rmSync(cwd, { recursive: true, force: true }));
    const server = await startServe({ PETSTORE_API_KEYS: ENV_KEY }, { cwd });
    t.after(() => server.kill());
    const path = join(cwd, 'data/petstore.db');
    const lines = jsonLines(server.stdout).filter((line) => String(line.msg).startsWith('database: '));
    assert.deepEqual(
      lines.map((line) => line.msg),
      [`database: ${path}`],
    );
    assert.equal(existsSync(path), true);
  });

  test('when LOG_FORMAT is pretty, then stdout has readable lines with the time, not JSON', async (t) => {
    const db = await database(t);
    // A port of its own: the harness cannot read the address from a pretty log, so it waits on /healthz.
    const port = await freePort();
    const server = await startServe({
      PORT: String(port),
      DATABASE_URL: db.url,
      PETSTORE_API_KEYS: ENV_KEY,
      LOG_FORMAT: 'pretty',
    });
    t.after(() => server.kill());
    const url = server.url;
    await server.waitFor('the listening line', () =>
      new RegExp(
        `^\\[\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d\\.\\d{3}\\] INFO: Server listening at http://127\\.0\\.0\\.1:${port}$`,
        'm',
      ).test(server.stdout)
        ? true
        : undefined,
    );
    assert.match(server.stdout, new RegExp(`^\\[[^\\]]+\\] INFO: database: ${db.path}$`, 'm'));
    await (await fetch(`${url}/healthz`)).arrayBuffer();
    server.signal('SIGTERM');
    const result = await server.exitStatus();
    assert.equal(result.code, 0);
    assert.match(result.stdout, /\] INFO: request\n/);
    for (const line of result.stdout.split('\n').filter((l) => l !== '')) {
      assert.doesNotMatch(line, /^\{/, 'no JSON line');
    }
  });

  test('when it starts again on the same database, then it prints no key', async (t) => {
    const db = await database(t);
    const first = await serve(t, { DATABASE_URL: db.url });
    const key = await first.waitFor(
      'the first key',
      () => /Bearer (pst_[A-Za-z0-9_-]+)/.exec(first.stderr)?.[1],
    );
    first.signal('SIGTERM');
    assert.equal((await first.exitStatus()).code, 0);

    const second = await serve(t, { DATABASE_URL: db.url });
    assert.equal((await getPets(second.url, key)).status, 200);
    second.signal('SIGTERM');
    const result = await second.exitStatus();
    assert.equal(result.code, 0);
    assert.doesNotMatch(result.stderr, /pst_/);
    assert.doesNotMatch(result.stderr, /curl/);
    assert.equal((await listKeys(db)).length, 1);
  });

  test('when PETSTORE_API_KEYS is set on a fresh database, then no key is created or printed', async (t) => {
    const db = await database(t);
    const server = await serve(t, { DATABASE_URL: db.url, PETSTORE_API_KEYS: ENV_KEY });
    assert.equal((await getPets(server.url, ENV_KEY)).status, 200);
    server.signal('SIGTERM');
    const result = await server.exitStatus();
    assert.equal(result.code, 0);
    assert.doesNotMatch(result.stderr, /pst_/);
    assert.deepEqual(await listKeys(db), []);
  });

  test('when a key made with keys create --scopes pets:read is used, then writes get 403 insufficient_scope, and keys list shows its last use once the server stops', async (t) => {
    const db = await database(t);
    const created = await runInProcess(['keys', 'create', '--name', 'reader', '--scopes', 'pets:read'], {
      DATABASE_URL: db.url,
    });
    assert.equal(created.code, 0, created.stderr);
    const reader = created.stdout.trim();
    const server = await serve(t, { DATABASE_URL: db.url });
    assert.deepEqual(await getPets(server.url, reader), { status: 200, body: [] });
    const refused = await createPet(server.url, reader, 'Rex', 1);
    assert.equal(refused.status, 403);
    assert.equal(
      refused.headers.get('www-authenticate'),
      'Bearer realm="animal-store", error="insufficient_scope", scope="pets:write"',
    );
    assert.deepEqual(await refused.json(), {
      code: 'forbidden',
      message: 'this API key does not have the scope pets:write, which this operation needs',
      status: 403,
    });
    const orders = await fetch(`${server.url}/v1/store/orders`, { headers: auth(reader) });
    assert.equal(orders.status, 403);
    assert.equal((await listKeys(db))[0]?.lastUsedAt, null, 'not written on the request path');

    server.signal('SIGTERM');
    assert.equal((await server.exitStatus()).code, 0);
    const [listed] = await listKeys(db);
    const lastUsed = Date.parse(listed?.lastUsedAt ?? '');
    assert.ok(
      lastUsed >= Date.parse(listed?.createdAt ?? '') && lastUsed <= Date.now(),
      listed?.lastUsedAt ?? 'null',
    );
    const table = await runInProcess(['keys', 'list'], { DATABASE_URL: db.url });
    assert.match(
      table.stdout.split('\n')[1] ?? '',
      /\spets:read\s+\S+ \S+\s+never\s+\d{4}-\d{2}-\d{2} \d{2}:\d{2}Z\s+active$/,
    );
  });

  test('when a key made with keys create is revoked by another process, then the running server refuses it at once', async (t) => {
    const db = await database(t);
    const revokedKey = await createKey(db, 'to-revoke');
    const keptKey = await createKey(db, 'kept');
    const server = await serve(t, { DATABASE_URL: db.url });
    assert.deepEqual(await getPets(server.url, revokedKey), { status: 200, body: [] });
    assert.deepEqual(await getPets(server.url, keptKey), { status: 200, body: [] });

    const id = (await listKeys(db)).find((k) => k.name === 'to-revoke')?.id as string;
    const revoke = await runInProcess(['keys', 'revoke', id], { DATABASE_URL: db.url });
    assert.equal(revoke.code, 0, revoke.stderr);

    const refused = await fetch(`${server.url}/v1/pets`, { headers: auth(revokedKey) });
    assert.equal(refused.status, 401);
    assert.match(refused.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
    assert.deepEqual(await refused.json(), {
      code: 'unauthorized',
      message: 'the API key is not valid',
      status: 401,
    });
    assert.deepEqual(await getPets(server.url, keptKey), { status: 200, body: [] });
  });

  test('when SIGTERM arrives during a request, then the request is answered, new connections are refused, it exits 0 and the data is kept', async (t) => {
    const db = await database(t);
    const server = await serve(t, { DATABASE_URL: db.url, PETSTORE_API_KEYS: ENV_KEY });
    const before = await createPet(server.url, ENV_KEY, 'Before', 1);
    assert.equal(before.status, 201);
    const beforePet = (await before.json()) as Pet;

    const inFlight = await beginCreatePet(t, server, { name: 'In flight', categoryId: 2 }, 'close');
    server.signal('SIGTERM');
    assert.equal(
      await poll('the port to refuse connections', async () =>
        (await refusesConnections(port(server))) ? true : undefined,
      ),
      true,
    );
    assert.equal(server.running, true, 'the process exited before answering the request in flight');

    inFlight.finish();
    const response = await poll('the response to the request in flight', () =>
      inFlight.connection.response(),
    );
    assert.equal(response.status, 201, response.body);
    const inFlightPet = JSON.parse(response.body) as Pet;
    assert.deepEqual(inFlightPet, {
      id: inFlightPet.id,
      name: 'In flight',
      categoryId: 2,
      status: 'available',
    });

    const result = await server.exitStatus();
    assert.equal(result.code, 0, server.output());
    assert.equal(result.signal, null);
    assert.ok(
      jsonLines(result.stdout).some((line) => line.msg === 'shutting down' && line.signal === 'SIGTERM'),
      result.stdout,
    );

    assert.equal(integrityCheck(db), 'ok');
    const restarted = await serve(t, { DATABASE_URL: db.url, PETSTORE_API_KEYS: ENV_KEY });
    assert.deepEqual(await getPets(restarted.url, ENV_KEY), { status: 200, body: [beforePet, inFlightPet] });
  });

  test('when SIGTERM arrives during a request on a keep-alive connection, then the answer closes the connection and the process exits 0', async (t) => {
    const db = await database(t);
    const server = await serve(t, { DATABASE_URL: db.url, PETSTORE_API_KEYS: ENV_KEY });
    const inFlight = await beginCreatePet(t, server, { name: 'Kept alive', categoryId: 3 }, 'keep-alive');
    server.signal('SIGTERM');
    await poll('the port to refuse connections', async () =>
      (await refusesConnections(port(server))) ? true : undefined,
    );

    inFlight.finish();
    const response = await poll('the response to the request in flight', () =>
      inFlight.connection.response(),
    );
    assert.equal(response.status, 201, response.body);
    // A draining server tells the client not to reuse the connection, and closes it: a keep-alive client
    // must not hold the shutdown open until the idle timeout.
    assert.equal(response.headers.connection, 'close');
    assert.equal(
      await poll('the server to close the connection', () => (inFlight.connection.closed ? true : undefined)),
      true,
    );
    const result = await server.exitStatus();
    assert.equal(result.code, 0, server.output());
  });

  test('when a request arrives on an open connection while the server drains, then the answer in flight says Connection: close and the one behind it is left unanswered, for the client to send again', async (t) => {
    const db = await database(t);
    const server = await serve(t, { DATABASE_URL: db.url, PETSTORE_API_KEYS: ENV_KEY });
    const inFlight = await beginCreatePet(t, server, { name: 'First', categoryId: 5 }, 'keep-alive');
    server.signal('SIGTERM');
    await poll('the port to refuse connections', async () =>
      (await refusesConnections(port(server))) ? true : undefined,
    );

    // The rest of the first request, and a second one pipelined right behind it.
    inFlight.finish(`GET /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${ENV_KEY}\r\n\r\n`);
    await poll('the server to close the connection', () => (inFlight.connection.closed ? true : undefined));
    // RFC 9112 §9.6: after a response with Connection: close, no later request on it is answered;
    // a client knows from that header that the second was not served, and sends it again elsewhere.
    const responses = inFlight.connection.responses();
    assert.deepEqual(
      responses.map((response) => [response.status, response.headers.connection]),
      [[201, 'close']],
      inFlight.connection.data,
    );
    assert.equal((await server.exitStatus()).code, 0, server.output());
  });

  test('when SIGINT arrives, then the server shuts down and exits 0', async (t) => {
    const db = await database(t);
    const server = await serve(t, { DATABASE_URL: db.url, PETSTORE_API_KEYS: ENV_KEY });
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    server.signal('SIGINT');
    const result = await server.exitStatus();
    assert.equal(result.code, 0, server.output());
    assert.equal(result.signal, null);
    assert.ok(
      jsonLines(result.stdout).some((line) => line.msg === 'shutting down' && line.signal === 'SIGINT'),
      result.stdout,
    );
    assert.equal(await refusesConnections(port(server)), true);
  });

  test('when requests are made, then stdout has one JSON request line each and no key or Authorization value anywhere', async (t) => {
    const db = await database(t);
    const createdKey = await createKey(db, 'logs');
    const wrongKey = `pst_${randomBytes(32).toString('base64url')}`;
    const server = await serve(t, { DATABASE_URL: db.url, PETSTORE_API_KEYS: ENV_KEY });

    const requests: { method: string; url: string; headers: Record<string, string>; body?: string }[] = [
      { method: 'GET', url: '/v1/pets?limit=5', headers: auth(createdKey) },
      {
        method: 'POST',
        url: '/v1/pets',
        headers: { ...auth(ENV_KEY), 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Logged', categoryId: 4 }),
      },
      { method: 'GET', url: '/v1/pets/1', headers: auth(createdKey) },
      { method: 'GET', url: '/v1/pets', headers: auth(wrongKey) },
      { method: 'GET', url: '/v1/pets', headers: {} },
      { method: 'GET', url: '/healthz', headers: {} },
      { method: 'GET', url: '/nowhere', headers: auth(ENV_KEY) },
    ];
    const statuses: number[] = [];
    for (const request of requests) {
      const res = await fetch(`${server.url}${request.url}`, {
        method: request.method,
        headers: request.headers,
        ...(request.body === undefined ? {} : { body: request.body }),
      });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
    assert.deepEqual(statuses, [200, 201, 200, 401, 401, 200, 404]);

    const logged = await server.waitFor('a log line per request', () => {
      const lines = jsonLines(server.stdout).filter((line) => line.msg === 'request');
      return lines.length >= requests.length ? lines : undefined;
    });
    assert.deepEqual(
      logged.map((line) => ({ method: line.method, url: line.url, statusCode: line.statusCode })),
      requests.map((request, i) => ({ method: request.method, url: request.url, statusCode: statuses[i] })),
    );

    server.signal('SIGTERM');
    const result = await server.exitStatus();
    assert.equal(result.code, 0);
    assert.ok(jsonLines(result.stdout).length > requests.length);
    for (const secret of [createdKey, ENV_KEY, wrongKey]) {
      assert.equal(result.stdout.includes(secret), false, `a key is in stdout:\n${result.stdout}`);
      assert.equal(result.stderr.includes(secret), false, `a key is in stderr:\n${result.stderr}`);
    }
    assert.doesNotMatch(result.stdout, /bearer/i);
    assert.doesNotMatch(result.stderr, /bearer/i);
  });
  test('when LOG_REQUESTS is false, then answered requests write no request line', async (t) => {
    const db = await database(t);
    const server = await serve(t, {
      DATABASE_URL: db.url,
      PETSTORE_API_KEYS: ENV_KEY,
      LOG_REQUESTS: 'false',
    });
    for (const url of ['/v1/pets', '/v1/pets/1', '/healthz']) {
      const res = await fetch(`${server.url}${url}`, { headers: auth(ENV_KEY) });
      await res.arrayBuffer();
    }
    server.signal('SIGTERM');
    const result = await server.exitStatus();
    assert.equal(result.code, 0);
    const lines = jsonLines(result.stdout);
    assert.ok(
      lines.some((line) => line.msg === 'shutting down'),
      result.stdout,
    );
    assert.deepEqual(
      lines.filter((line) => line.msg === 'request'),
      [],
    );
  });
});

describe('durability', () => {
  test('when the server is killed with SIGKILL right after its 201s, then every pet answered 201 is there after a restart', async (t) => {
    const db = await database(t);
    const env = { DATABASE_URL: db.url, PETSTORE_API_KEYS: ENV_KEY };
    const server = await serve(t, env);

    const answered: Pet[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await createPet(server.url, ENV_KEY, `Sequential ${i}`, i);
      assert.equal(res.status, 201);
      answered.push((await res.json()) as Pet);
    }
    // Many at once; the kill lands while some are still being answered.
    let signalled = false;
    const concurrent = Array.from({ length: 40 }, async (_, i) => {
      const res = await createPet(server.url, ENV_KEY, `Concurrent ${i}`, 100 + i);
      if (res.status !== 201) return;
      const pet = (await res.json()) as Pet;
      answered.push(pet);
      if (answered.length >= 15 && !signalled) {
        signalled = true;
        server.signal('SIGKILL');
      }
    });
    await Promise.allSettled(concurrent);
    if (!signalled) server.signal('SIGKILL');
    const killed = await server.exitStatus();
    assert.equal(killed.signal, 'SIGKILL');
    assert.ok(answered.length >= 15, `only ${answered.length} pets were answered 201`);

    const restarted = await serve(t, env);
    const { status, body } = await getPets(restarted.url, ENV_KEY);
    assert.equal(status, 200);
    const stored = new Map((body as Pet[]).map((pet) => [pet.id, pet]));
    const missing = answered.filter((pet) => !isDeepStrictEqual(stored.get(pet.id), pet));
    assert.deepEqual(missing, [], 'pets answered 201 are missing or different after the restart');
  });
});
