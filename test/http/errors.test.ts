import assert from 'node:assert/strict';
import { after, backends, before, httpLayerBackends, test } from '../support/backends.js';
import { assertError } from '../support/error-body.js';
import { startTestServer, type TestResponse, type TestServer } from '../support/test-server.js';

/** The security headers every response carries. */
function assertCommonHeaders(res: TestResponse, what: string): void {
  assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8', `${what}: content type`);
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff', `${what}: X-Content-Type-Options`);
  assert.equal(res.headers.get('x-powered-by'), null, `${what}: X-Powered-By`);
}

/** Nothing in a message that tells a client about the service's insides. */
function assertRevealsNoInternals(message: string, databasePath: string): void {
  assert.doesNotMatch(message, /sqlite|postgres|\bSQL\b|SELECT|INSERT|database connection/i);
  assert.doesNotMatch(message, /\n\s*at |\.ts:\d+|\.js:\d+|node_modules|Error:/);
  assert.doesNotMatch(message, /(^|[\s'"(])\/(tmp|home|work|usr|var|opt|srv|app)\//);
  assert.equal(message.includes(databasePath), false);
}

for (const backend of httpLayerBackends) {
  backend.describe(`errors and routing (${backend.name})`, () => {
    let server: TestServer;
    let petId: number;
    before(async () => {
      server = await startTestServer({ backend });
      const created = await server.request('POST', '/v1/pets', { body: { name: 'Rex', categoryId: 1 } });
      assert.equal(created.status, 201);
      petId = created.json<{ id: number }>().id;
    });
    after(() => server.close());

    for (const path of ['/nope', '/v1/nope', '/v1/pets/1/owner', '/v2/pets', '/v1', '/']) {
      test(`when the unknown path ${path} is requested, then 404 not_found`, async () => {
        assertError(await server.request('GET', path), 404, 'not_found', 'no resource at this address');
      });
    }

    for (const [method, path, allow] of [
      ['DELETE', '/v1/pets', 'GET, HEAD, POST'],
      ['PUT', '/v1/pets', 'GET, HEAD, POST'],
      ['PATCH', '/v1/pets', 'GET, HEAD, POST'],
      ['POST', '/v1/pets/1', 'GET, HEAD'],
      ['DELETE', '/v1/pets/1', 'GET, HEAD'],
      ['PUT', '/v1/pets/1', 'GET, HEAD'],
      ['POST', '/v1/openapi.json', 'GET, HEAD'],
      ['DELETE', '/healthz', 'GET, HEAD'],
    ] as const) {
      test(`when ${method} ${path} is requested, then 405 method_not_allowed with Allow: ${allow}`, async () => {
        const res = await server.request(method, path);
        assertError(res, 405, 'method_not_allowed', `${method} is not allowed here; use ${allow}`);
        assert.equal(res.headers.get('allow'), allow);
      });
    }

    test('when HEAD is sent to the GET routes, then each answers 200 with headers and no body', async () => {
      for (const path of ['/v1/pets', `/v1/pets/${petId}`, '/v1/openapi.json', '/healthz', '/readyz']) {
        const res = await server.request('HEAD', path);
        assert.equal(res.status, 200, `HEAD ${path}`);
        assert.equal(res.text, '', `HEAD ${path} has no body`);
        assertCommonHeaders(res, `HEAD ${path}`);
      }
    });

    test('when HEAD asks for a pet, then it carries the same headers as GET', async () => {
      const get = await server.request('GET', `/v1/pets/${petId}`);
      const head = await server.request('HEAD', `/v1/pets/${petId}`);
      assert.equal(head.status, 200);
      for (const name of ['content-type', 'deprecation', 'sunset', 'link']) {
        assert.equal(head.headers.get(name), get.headers.get(name), name);
      }
      assert.equal(head.headers.get('content-length'), String(Buffer.byteLength(get.text)));
    });

    test('when HEAD is sent without a key to a pets route, then 401 with the Bearer challenge', async () => {
      // Raw fetch: the contract check of server.request expects an Error body, which HEAD never has.
      for (const path of ['/v1/pets', `/v1/pets/${petId}`]) {
        const res = await fetch(`${server.url}${path}`, { method: 'HEAD' });
        assert.equal(res.status, 401, `HEAD ${path}`);
        assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="animal-store"');
        assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
        assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
        assert.equal(await res.text(), '');
      }
    });

    test('when a path has malformed URL encoding (/v1/pets/%zz), then an Error body comes back and the service lives on', async () => {
      const res = await server.request('GET', '/v1/pets/%zz');
      const body = assertError(res, 400, 'invalid_request', 'the request URL is malformed');
      assertRevealsNoInternals(body.message, server.database.url);
      assertCommonHeaders(res, 'GET /v1/pets/%zz');
      const next = await server.request('GET', `/v1/pets/${petId}`);
      assert.equal(next.status, 200);
    });

    test('when a query has malformed URL encoding, then an Error body comes back', async () => {
      const res = await server.request('GET', '/v1/pets?status=%zz');
      assertError(res, 400, 'invalid_request', { names: ['status'] });
    });

    test('when a pets path ends with a slash or is doubled, then it is an Error body naming what is wrong, not a crash', async () => {
      // An empty or NUL petId is still getPet's parameter; a doubled slash is no address of the API.
      const expected: [string, number, string, string][] = [
        ['/v1/pets/', 400, 'invalid_request', 'petId must be an integer'],
        ['/v1/pets/%00', 400, 'invalid_request', 'petId must be an integer'],
        ['/v1//pets', 404, 'not_found', 'no resource at this address'],
      ];
      for (const [path, status, code, message] of expected)
        assertError(await server.request('GET', path), status, code, message, path);
    });

    test('when responses of every kind are sent, then all are application/json; charset=utf-8 with nosniff and no X-Powered-By', async () => {
      const responses: [string, TestResponse][] = [
        ['list', await server.request('GET', '/v1/pets')],
        ['create', await server.request('POST', '/v1/pets', { body: { name: 'Tom', categoryId: 2 } })],
        ['get', await server.request('GET', `/v1/pets/${petId}`)],
        ['400 body', await server.request('POST', '/v1/pets', { body: { name: 1 } })],
        ['400 query', await server.request('GET', '/v1/pets?limit=0')],
        ['400 path', await server.request('GET', '/v1/pets/abc')],
        ['400 json', await server.request('POST', '/v1/pets', { body: '{' })],
        ['401', await server.request('GET', '/v1/pets', { key: null })],
        ['404 path', await server.request('GET', '/nope')],
        ['404 pet', await server.request('GET', '/v1/pets/999999')],
        ['405', await server.request('DELETE', '/v1/pets')],
        [
          '413',
          await server.request('POST', '/v1/pets', { body: { name: 'x'.repeat(70_000), categoryId: 1 } }),
        ],
        [
          '415',
          await server.request('POST', '/v1/pets', { body: 'x', headers: { 'content-type': 'text/plain' } }),
        ],
        ['openapi', await server.request('GET', '/v1/openapi.json', { key: null })],
        ['healthz', await server.request('GET', '/healthz', { key: null })],
        ['readyz', await server.request('GET', '/readyz', { key: null })],
        ['bad URL', await server.request('GET', '/v1/pets/%zz')],
      ];
      assert.deepEqual(
        responses.map(([, res]) => res.status),
        [200, 201, 200, 400, 400, 400, 400, 401, 404, 404, 405, 413, 415, 200, 200, 200, 400],
      );
      for (const [what, res] of responses) assertCommonHeaders(res, what);
    });
  });
}

// On every backend: each driver fails in its own words, none of which may reach a client.
for (const backend of backends) {
  backend.describe(`internal errors (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ backend });
      const created = await server.request('POST', '/v1/pets', { body: { name: 'Rex', categoryId: 1 } });
      assert.equal(created.status, 201);
      // Force a real failure: the database goes away under the running service.
      await server.storage.close();
    });
    // The storage is closed already: stop the service and throw the database away.
    after(async () => {
      await server.app.close();
      await server.database.drop();
    });

    for (const [method, path, body] of [
      ['GET', '/v1/pets', undefined],
      ['GET', '/v1/pets?status=sold&limit=3', undefined],
      ['GET', '/v1/pets/1', undefined],
      ['POST', '/v1/pets', { name: 'Tom', categoryId: 2 }],
    ] as const) {
      test(`when the database is gone and ${method} ${path} is requested, then 503 unavailable with Retry-After reveals no internals`, async () => {
        const res = await server.request(method, path, body === undefined ? {} : { body });
        const error = assertError(
          res,
          503,
          'unavailable',
          'the database is unavailable; retry after a few seconds',
        );
        assert.equal(res.headers.get('retry-after'), '5');
        assertRevealsNoInternals(error.message, server.database.url.replace(/^sqlite:/, ''));
        assertRevealsNoInternals(res.text, server.database.url.replace(/^sqlite:/, ''));
        assertCommonHeaders(res, `${method} ${path}`);
      });
    }

    test('when the database is gone, then /readyz answers 503 unavailable and /healthz still 200', async () => {
      const ready = await server.request('GET', '/readyz', { key: null });
      const error = assertError(ready, 503, 'unavailable', 'the database cannot read or write now');
      assertRevealsNoInternals(error.message, server.database.url.replace(/^sqlite:/, ''));
      assertCommonHeaders(ready, '/readyz');
      const health = await server.request('GET', '/healthz', { key: null });
      assert.equal(health.status, 200);
      assert.deepEqual(health.json(), { status: 'ok' });
    });

    test('when the database is gone, then a request without a key still gets 401, not 503', async () => {
      const res = await server.request('GET', '/v1/pets', { key: null });
      assertError(res, 401, 'unauthorized', 'an API key is required: send "Authorization: Bearer <key>"');
    });
  });
}
