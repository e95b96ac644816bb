import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, type TestContext, test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { firstKeyMessage } from '../../src/server.js';
import {
  jsonLines,
  killAllCliProcesses,
  oneLineFailure,
  poll,
  runCli,
  runInProcess,
  type ServeProcess,
  startServe,
} from '../support/cli.js';
import {
  createKey,
  database,
  integrityCheck,
  KEY,
  listKeys,
  newDatabase,
  PACKAGE_VERSION,
} from '../support/cli-commands.js';
import { freePort } from '../support/free-port.js';

/** `petstore serve`: its configuration errors, its first start, its logs, its shutdown, its durability. */

after(() => killAllCliProcesses());

/** A key supplied through PETSTORE_API_KEYS. */
const ENV_KEY = 'env-key-0123456789abcdef';

interface Pet {
  id: number;
  name: string;
  categoryId: number;
  status: string;
}

/** `petstore serve` on this database; killed when the test ends, whatever happens. */
async function serve(t: TestContext, env: Record<string, string>): Promise<ServeProcess> {
  const server = await startServe(env);
  t.after(() => server.kill());
  return server;
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
