import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sqlite } from '../support/backends.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

describe('docs page addresses', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ backend: sqlite });
  });
  after(() => server.close());

  test('when /docs/json is asked for, then it redirects to the one address of the contract, /v1/openapi.json', async () => {
    const res = await fetch(`${server.url}/docs/json`, { redirect: 'manual' });
    await res.arrayBuffer();
    assert.equal(res.status, 308);
    assert.equal(res.headers.get('location'), '/v1/openapi.json');
    // Followed, it is the document itself.
    const followed = await fetch(`${server.url}/docs/json`);
    assert.equal(followed.url, `${server.url}/v1/openapi.json`);
    assert.deepEqual(await followed.json(), server.contract.document);
  });

  test('when /docs/yaml is asked for, then it is not served: 404 with the Error body', async () => {
    const res = await server.request('GET', '/docs/yaml', { key: null });
    assert.equal(res.status, 404);
    assert.deepEqual(res.json(), { code: 'not_found', message: 'no resource at this address', status: 404 });
  });
});

describe('docs page turned off (DOCS_ENABLED=false)', () => {
  let server: TestServer;
  let enabled: TestServer;
  before(async () => {
    server = await startTestServer({ backend: sqlite, env: { DOCS_ENABLED: 'false' } });
    enabled = await startTestServer({ backend: sqlite });
  });
  after(async () => {
    await server.close();
    await enabled.close();
  });

  const pageAddresses = [
    '/docs',
    '/docs/',
    '/docs/static/index.html',
    '/docs/static/swagger-ui.css',
    '/docs/json',
  ];

  test('when DOCS_ENABLED=false, then the page and every one of its assets answer 404 with the Error body, while the OpenAPI document is still served', async () => {
    for (const path of pageAddresses) {
      // The same addresses serve the page by default.
      const served = await fetch(`${enabled.url}${path}`);
      await served.arrayBuffer();
      assert.equal(served.status, 200, `${path} is served by default`);

      const res = await server.request('GET', path, { key: null });
      assert.equal(res.status, 404, path);
      assert.deepEqual(res.json(), {
        code: 'not_found',
        message: 'no resource at this address',
        status: 404,
      });
    }
    const document = await server.request('GET', '/v1/openapi.json', { key: null });
    assert.equal(document.status, 200);
    assert.equal(document.json<{ openapi: string }>().openapi, enabled.contract.document.openapi);
  });
});
