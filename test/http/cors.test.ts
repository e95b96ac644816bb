import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sqlite } from '../support/backends.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

const APP = 'https://app.example.com';

describe('CORS, when off (the default)', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ backend: sqlite });
  });
  after(() => server.close());

  test('when a browser sends an Origin, then no Access-Control header is granted', async () => {
    const res = await server.request('GET', '/v1/pets', { headers: { origin: APP } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('access-control-allow-origin'), null);
  });

  test('when a preflight arrives, then it is 405 with Allow like any unsupported method', async () => {
    const res = await server.request('OPTIONS', '/v1/pets', {
      key: null,
      headers: { origin: APP, 'access-control-request-method': 'POST' },
    });
    assert.equal(res.status, 405);
    assert.equal(res.headers.get('allow'), 'GET, HEAD, POST');
  });
});

describe('CORS, when CORS_ORIGINS is set', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({
      backend: sqlite,
      env: { CORS_ORIGINS: `${APP}, https://admin.example.com` },
    });
  });
  after(() => server.close());

  test('when an allowed origin sends a preflight, then it is answered 204 without a key', async () => {
    const res = await fetch(`${server.url}/v1/pets`, {
      method: 'OPTIONS',
      headers: {
        origin: APP,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    assert.equal(res.status, 204);
    assert.equal(res.headers.get('access-control-allow-origin'), APP);
    assert.equal(res.headers.get('access-control-allow-methods'), 'GET, HEAD, POST');
    assert.equal(
      res.headers.get('access-control-allow-headers'),
      'Authorization, Content-Type, X-Request-Id, Idempotency-Key, traceparent, tracestate',
    );
    assert.equal(res.headers.get('access-control-max-age'), '600');
  });

  test('when an allowed origin calls the API, then the response names it and exposes the paging and deprecation headers', async () => {
    const res = await server.request('GET', '/v1/pets', { headers: { origin: 'https://admin.example.com' } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('access-control-allow-origin'), 'https://admin.example.com');
    const exposed = (res.headers.get('access-control-expose-headers') ?? '').split(', ');
    for (const header of ['Link', 'Location', 'Deprecation', 'Sunset', 'X-Request-Id', 'traceresponse'])
      assert.ok(exposed.includes(header), header);
  });

  test('when an allowed origin is refused for its key, then the 401 still carries the CORS header so the page can read it', async () => {
    const res = await server.request('GET', '/v1/pets', { key: null, headers: { origin: APP } });
    assert.equal(res.status, 401);
    assert.equal(res.headers.get('access-control-allow-origin'), APP);
  });

  test('when another origin calls, then no Access-Control-Allow-Origin is granted', async () => {
    const preflight = await fetch(`${server.url}/v1/pets`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example.net', 'access-control-request-method': 'GET' },
    });
    // Answered, but without the origin: the browser, not the service, then refuses the call.
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), null);
    assert.equal(preflight.headers.get('vary'), 'Origin');
    const res = await server.request('GET', '/v1/pets', {
      key: TEST_KEY,
      headers: { origin: 'https://evil.example.net' },
    });
    assert.equal(res.headers.get('access-control-allow-origin'), null);
  });

  test('when an unknown path is requested, then it is still 404, not swallowed by the preflight route', async () => {
    const res = await server.request('GET', '/v1/nothing-here');
    assert.equal(res.status, 404);
  });
});
