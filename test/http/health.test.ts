import assert from 'node:assert/strict';
import { after, backends, before, test } from '../support/backends.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

for (const backend of backends) {
  backend.describe(`health probes (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ backend });
    });
    after(() => server.close());

    test('when /healthz is requested, then 200 {status: "ok"}', async () => {
      const res = await server.request('GET', '/healthz', { key: null });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
      assert.deepEqual(res.json(), { status: 'ok' });
    });

    test('when /readyz is requested and the database answers, then 200 {status: "ready"}', async () => {
      const res = await server.request('GET', '/readyz', { key: null });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
      assert.deepEqual(res.json(), { status: 'ready' });
    });

    test('when the probes are requested with a key, then they answer the same', async () => {
      assert.deepEqual((await server.request('GET', '/healthz')).json(), { status: 'ok' });
      assert.deepEqual((await server.request('GET', '/readyz')).json(), { status: 'ready' });
    });

    test('when the probes are requested under /v1, then 404 not_found', async () => {
      for (const path of ['/v1/healthz', '/v1/readyz']) {
        const res = await server.request('GET', path);
        assert.equal(res.status, 404, path);
        const body = res.json<{ code: string; message: string; status: number }>();
        assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'status']);
        assert.equal(body.code, 'not_found');
        assert.equal(body.status, 404);
      }
    });
  });
}
