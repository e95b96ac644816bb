import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import { jsonLines, startServe } from '../../support/service-process.js';
import { sqlite } from '../support/backends.js';
import { captureLog } from '../support/log-capture.js';
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
