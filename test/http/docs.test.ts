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
