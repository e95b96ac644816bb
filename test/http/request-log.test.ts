import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.js';
import { newApiKey } from '../../src/domain/api-keys.js';
import { levelOf, loggableUrl } from '../../src/http/observability/request-log.js';
import { isRequestInfoLine, loggerOptions } from '../../src/logging.js';
import { BetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import { jsonLines, startServe } from '../../support/service-process.js';
import { backends, sqlite } from '../support/backends.js';
import { until } from '../support/eventually.js';
import { captureLog, type LogLine } from '../support/log-capture.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

describe('log lines and request ids', () => {
  let server: TestServer;
  const { lines, logger } = captureLog('debug');
  before(async () => {
    server = await startTestServer({ backend: sqlite, logger });
  });
  after(() => server.close());

  test('when a request carries an X-Request-Id, then every log line of that request has it as requestId', async () => {
    const first = lines.length;
    const ok = await server.request('GET', '/v1/pets', { headers: { 'x-request-id': 'trace-ok-1' } });
    const failed = await server.request('POST', '/v1/pets', {
      body: '{"name":',
      headers: { 'x-request-id': 'trace-bad-2' },
    });
    assert.equal(ok.status, 200);
    assert.equal(failed.status, 400);

    const okLines = lines.slice(first).filter((line) => line.requestId === 'trace-ok-1');
    const badLines = lines.slice(first).filter((line) => line.requestId === 'trace-bad-2');
    assert.deepEqual(
      okLines.map((line) => [line.msg, line.method, line.url, line.statusCode]),
      [['request', 'GET', '/v1/pets', 200]],
    );
    assert.ok(badLines.length >= 1);
    assert.ok(badLines.every((line) => line.requestId === 'trace-bad-2'));
    assert.ok(badLines.some((line) => line.statusCode === 400));
    // No line of these requests lacks its id.
    const ids = new Set(
      lines
        .slice(first)
        .filter((line) => 'url' in line)
        .map((line) => line.requestId),
    );
    assert.deepEqual([...ids].sort(), ['trace-bad-2', 'trace-ok-1']);
  });

  test('when an id is generated, then the log line carries the same id as the X-Request-Id header', async () => {
    const first = lines.length;
    const res = await server.request('GET', '/v1/pets?limit=1');
    const id = res.headers.get('x-request-id');
    assert.ok(id);
    const mine = lines.slice(first).filter((line) => line.url === '/v1/pets?limit=1');
    assert.equal(mine.length, 1);
    assert.equal(mine[0]?.requestId, id);
    assert.ok(!JSON.stringify(mine).includes('authorization'), 'no header is logged');
  });

  test('when many requests are answered at once, then by the end of that turn each has exactly one line, with its own id, URL, status and time', async () => {
    const first = lines.length;
    const before = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        server.request('GET', `/v1/pets?limit=${i + 1}`, { headers: { 'x-request-id': `batch-${i}` } }),
      ),
    );
    assert.deepEqual(
      answers.map((answer) => answer.status),
      answers.map(() => 200),
    );
    await new Promise((resolve) => setImmediate(resolve));
    const mine = lines.slice(first).filter((line) => String(line.requestId).startsWith('batch-'));
    assert.equal(mine.length, 40);
    for (let i = 0; i < 40; i++) {
      const line = mine.find((candidate) => candidate.requestId === `batch-${i}`);
      assert.equal(line?.url, `/v1/pets?limit=${i + 1}`);
      assert.equal(line?.statusCode, 200);
      assert.equal(line?.msg, 'request');
      assert.ok((line?.time as number) >= before && (line?.time as number) <= Date.now());
    }
  });
});

describe('the request log of a running process (its own stdout)', () => {
  const KEY = 'request-log-test-key-0123456789';

  test('when requests are answered, then each line reaches stdout within a moment, and all of them by the end of a shutdown', async () => {
    const serve = await startServe({
      DATABASE_URL: 'sqlite::memory:',
      PETSTORE_API_KEYS: KEY,
      LOG_LEVEL: 'info',
      RATE_LIMIT_PER_SECOND: '0',
    });
    try {
      const requestLines = () => jsonLines(serve.stdout).filter((line) => line.msg === 'request');
      const get = (path: string) =>
        fetch(`${serve.url}${path}`, { headers: { authorization: `Bearer ${KEY}` } }).then((res) => {
          assert.equal(res.status, 200);
          return res.text();
        });
      // Light traffic, far from filling the buffer: the lines still come out, without a shutdown.
      for (let i = 0; i < 5; i++) await get(`/v1/pets?limit=${i + 1}`);
      await serve.waitFor('the 5 request lines', () => (requestLines().length >= 5 ? true : undefined));
      // Written by pino through the service's own logger, with every field.
      const first = requestLines().find((line) => line.url === '/v1/pets?limit=1');
      assert.ok(first, 'the first request has its line');
      const { time, pid, requestId, ms, ...fields } = first;
      assert.deepEqual(fields, {
        level: 30,
        hostname: hostname(),
        method: 'GET',
        url: '/v1/pets?limit=1',
        statusCode: 200,
        clientAddress: '127.0.0.1',
        apiKeyId: 'env:1',
        msg: 'request',
      });
      assert.ok(Math.abs((time as number) - Date.now()) < 60_000, `time ${time}`);
      assert.equal(pid, serve.child.pid);
      assert.match(requestId as string, /^[0-9a-f-]{36}$/);
      assert.equal(typeof ms, 'number');

      // Then a burst, answered, and at once a shutdown: every line of it is written before the exit.
      await Promise.all(Array.from({ length: 200 }, (_, i) => get(`/v1/pets?limit=${1 + (i % 100)}`)));
      const { code } = await serve.stop();
      assert.equal(code, 0);
      assert.equal(requestLines().length, 205, 'one line per answered request');
    } finally {
      await serve.kill();
    }
  });
});

describe('request lines with LOG_REQUESTS=false', () => {
  let server: TestServer;
  const { lines, logger } = captureLog('info');
  before(async () => {
    server = await startTestServer({ backend: sqlite, logger, env: { LOG_REQUESTS: 'false' } });
  });
  after(() => server.close());

  test('when a request is answered, then it leaves no line; when one fails with a 500, then its line is kept', async () => {
    const headers = (id: string) => ({ headers: { 'x-request-id': id } });
    assert.equal((await server.request('GET', '/v1/pets', headers('quiet-ok'))).status, 200);
    // A table gone under the running service: the one way to a 500 from outside.
    const db = new BetterSqlite3(server.database.url.slice('sqlite:'.length));
    try {
      db.exec('DROP TABLE pets');
    } finally {
      db.close();
    }
    assert.equal((await server.request('GET', '/v1/pets', headers('quiet-crash'))).status, 500);
    const byRequest = (id: string) =>
      lines.filter((line) => line.requestId === id).map((line) => [line.level, line.msg]);
    assert.deepEqual(byRequest('quiet-ok'), []);
    assert.deepEqual(byRequest('quiet-crash'), [[50, 'request failed']]);
  });
});

/** The request line of the request sent with X-Request-Id `id`, with the fields these tests read. */
function requestLine(lines: LogLine[], id: string): Record<string, unknown> {
  const mine = lines.filter((line) => line.requestId === id && line.msg === 'request');
  assert.equal(mine.length, 1, `one request line for ${id}: ${JSON.stringify(lines.slice(-5))}`);
  return fieldsOf(mine[0] as LogLine);
}

function fieldsOf({ level, statusCode, clientAddress, apiKeyId, code }: LogLine): Record<string, unknown> {
  return { level, statusCode, clientAddress, apiKeyId, code };
}

const INFO = 30;
const WARN = 40;
const ERROR = 50;

for (const backend of backends) {
  backend.describe(`request lines: fields and levels by outcome (${backend.name})`, () => {
    let server: TestServer;
    const { lines, logger } = captureLog('info');
    before(async () => {
      // Behind a proxy on 127.0.0.1: the client is the one X-Forwarded-For names.
      server = await startTestServer({ backend, logger, env: { TRUSTED_PROXIES: '127.0.0.1' } });
    });
    after(() => server.close());

    const send = (
      id: string,
      method: string,
      path: string,
      options: Parameters<TestServer['request']>[2] = {},
    ) =>
      server.request(method, path, {
        ...options,
        headers: { 'x-request-id': id, 'x-forwarded-for': '203.0.113.7', ...options.headers },
      });

    test('when requests succeed or are refused for the client’s mistake, then each line is info, with the client address, the key id once known and the error code', async () => {
      const stored = newApiKey('logged', new Date());
      await server.storage.apiKeys.insert(stored.record);
      const sold = await send('l-201', 'POST', '/v1/pets', {
        body: { name: 'Sold', categoryId: 1, status: 'sold' },
      });
      assert.equal(sold.status, 201);
      const soldId = sold.json<{ id: number }>().id;
      const outcomes: [string, number, Promise<unknown>][] = [
        ['l-200', 200, send('l-200', 'GET', '/v1/pets')],
        ['l-200-stored', 200, send('l-200-stored', 'GET', '/v1/pets', { key: stored.secret })],
        ['l-400', 400, send('l-400', 'GET', '/v1/pets?limit=0')],
        ['l-401', 401, send('l-401', 'GET', '/v1/pets', { key: null })],
        ['l-401-bad', 401, send('l-401-bad', 'GET', '/v1/pets', { key: 'pst_not-a-key-at-all-0123456789' })],
        ['l-404', 404, send('l-404', 'GET', '/v1/no/such/path')],
        ['l-409', 409, send('l-409', 'POST', '/v1/store/orders', { body: { petId: soldId } })],
      ];
      for (const [id, status, answer] of outcomes)
        assert.equal(((await answer) as { status: number }).status, status, id);
      // Info lines are written together at the end of the event loop's turn that answered them.
      await new Promise((resolve) => setImmediate(resolve));
      const client = { clientAddress: '203.0.113.7' };
      assert.deepEqual(requestLine(lines, 'l-201'), {
        level: INFO,
        statusCode: 201,
        ...client,
        apiKeyId: 'env:1',
        code: undefined,
      });
      assert.deepEqual(requestLine(lines, 'l-200'), {
        level: INFO,
        statusCode: 200,
        ...client,
        apiKeyId: 'env:1',
        code: undefined,
      });
      assert.deepEqual(requestLine(lines, 'l-200-stored'), {
        level: INFO,
        statusCode: 200,
        ...client,
        apiKeyId: stored.record.id,
        code: undefined,
      });
      assert.deepEqual(requestLine(lines, 'l-400'), {
        level: INFO,
        statusCode: 400,
        ...client,
        apiKeyId: 'env:1',
        code: 'invalid_request',
      });
      assert.deepEqual(requestLine(lines, 'l-401'), {
        level: INFO,
        statusCode: 401,
        ...client,
        apiKeyId: undefined,
        code: 'unauthorized',
      });
      assert.deepEqual(requestLine(lines, 'l-401-bad'), {
        level: INFO,
        statusCode: 401,
        ...client,
        apiKeyId: undefined,
        code: 'unauthorized',
      });
      assert.deepEqual(requestLine(lines, 'l-404'), {
        level: INFO,
        statusCode: 404,
        ...client,
        apiKeyId: undefined,
        code: 'not_found',
      });
      assert.deepEqual(requestLine(lines, 'l-409'), {
        level: INFO,
        statusCode: 409,
        ...client,
        apiKeyId: 'env:1',
        code: 'conflict',
      });
      assert.ok(
        !JSON.stringify(lines).includes(stored.secret.slice(4)),
        'the stored key itself is never logged',
      );
    });
  });
}

describe('request lines: warn for 429 and 503, error for a 500, and the connecting address without trusted proxies', () => {
  const { lines, logger } = captureLog('info');
  const servers: TestServer[] = [];
  after(async () => {
    for (const server of servers.reverse()) await server.close();
  });

  test('when a key is throttled (429) or the node sheds load (503), then the line is warn with its code; X-Forwarded-For is ignored without TRUSTED_PROXIES', async () => {
    const limited = await startTestServer({
      backend: sqlite,
      logger,
      env: { RATE_LIMIT_PER_SECOND: '0.01', RATE_LIMIT_BURST: '1' },
    });
    servers.push(limited);
    const headers = (id: string) => ({ headers: { 'x-request-id': id, 'x-forwarded-for': '203.0.113.7' } });
    assert.equal((await limited.request('GET', '/v1/pets', headers('w-200'))).status, 200);
    assert.equal((await limited.request('GET', '/v1/pets', headers('w-429'))).status, 429);
    const local = { clientAddress: '127.0.0.1', apiKeyId: 'env:1' };
    assert.deepEqual(requestLine(lines, 'w-200'), {
      level: INFO,
      statusCode: 200,
      ...local,
      code: undefined,
    });
    assert.deepEqual(requestLine(lines, 'w-429'), {
      level: WARN,
      statusCode: 429,
      ...local,
      code: 'rate_limited',
    });

    // A heap limit of 1 MiB: every /v1 request is shed, before the key is even read.
    const shedding = await startTestServer({
      backend: sqlite,
      logger,
      env: { OVERLOAD_MAX_HEAP_USED_MB: '1' },
    });
    servers.push(shedding);
    // the load shedder samples on its own schedule: the refusal is awaited, not timed.
    await until(
      () => shedding.request('GET', '/v1/pets', headers('w-503')),
      (res) => res.status === 503,
      'a 503 from load shedding',
    );
    // The requests before it were let through (200): the line of the one shed.
    const shed = lines.filter((line) => line.requestId === 'w-503' && line.statusCode === 503);
    assert.equal(shed.length, 1);
    assert.deepEqual(fieldsOf(shed[0] as LogLine), {
      level: WARN,
      statusCode: 503,
      clientAddress: '127.0.0.1',
      apiKeyId: undefined,
      code: 'unavailable',
    });
  });

  test('when a request fails with a 500, then its request line is error, with the code internal_error', async () => {
    const server = await startTestServer({ backend: sqlite, logger });
    servers.push(server);
    const db = new BetterSqlite3(server.database.url.slice('sqlite:'.length));
    try {
      db.exec('DROP TABLE pets');
    } finally {
      db.close();
    }
    assert.equal(
      (await server.request('GET', '/v1/pets', { headers: { 'x-request-id': 'e-500' } })).status,
      500,
    );
    assert.deepEqual(requestLine(lines, 'e-500'), {
      level: ERROR,
      statusCode: 500,
      clientAddress: '127.0.0.1',
      apiKeyId: 'env:1',
      code: 'internal_error',
    });
  });

  test('when the level of each status is asked, then 5xx is error but 503, 429 is warn, and the rest is info', () => {
    const levels = Object.fromEntries(
      [200, 201, 204, 304, 400, 401, 403, 404, 409, 413, 429, 500, 502, 503].map((s) => [s, levelOf(s)]),
    );
    assert.deepEqual(levels, {
      200: 'info',
      201: 'info',
      204: 'info',
      304: 'info',
      400: 'info',
      401: 'info',
      403: 'info',
      404: 'info',
      409: 'info',
      413: 'info',
      429: 'warn',
      500: 'error',
      502: 'error',
      503: 'warn',
    });
  });
});

test("when a logged URL spells a parameter's name with percent-escapes or a +, then it is that parameter: its value is kept if the operation defines it, redacted if not", () => {
  const defined = new Set(['limit', 'status', 'a b']);
  assert.equal(
    loggableUrl('/v1/pets?li%6Dit=5&%73tatus=sold&a+b=1&api%5Fkey=pst_secret&limit=7', defined),
    '/v1/pets?li%6Dit=5&%73tatus=sold&a+b=1&api%5Fkey=[redacted]&limit=7',
  );
  // A name that does not decode is kept as it is, and is not one the operation defines.
  assert.equal(loggableUrl('/v1/pets?%E0%A4%A=x&limit=2', defined), '/v1/pets?%E0%A4%A=[redacted]&limit=2');
});

describe('request lines batched by the JSON logger’s destination', () => {
  test('when pino, built as the service builds it, writes a request’s info line, then the destination holds it for a batch; a warn, an error or another info line it writes at once', async () => {
    const { stream: _stdout, ...options } = await loggerOptions(loadConfig({}));
    const written: string[] = [];
    const logger = pino(options as pino.LoggerOptions, { write: (text: string) => written.push(text) });
    const line = {
      method: 'GET',
      url: '/v1/pets?limit=20',
      statusCode: 200,
      ms: 0.11,
      clientAddress: '127.0.0.1',
    };
    logger.child({ requestId: 'id "quoted" é' }).info(line, 'request');
    logger.warn({ ...line, statusCode: 429, code: 'rate_limited' }, 'request');
    logger.error({ ...line, statusCode: 500, code: 'internal_error' }, 'request errored');
    logger.info({ port: 3000 }, 'listening');
    logger.info({ note: '"msg":"request"' }, 'request started');
    assert.equal(written.length, 5);
    assert.deepEqual(
      written.map((text) => isRequestInfoLine(text)),
      [true, false, false, false, false],
    );
  });
});
