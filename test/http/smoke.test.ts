import assert from 'node:assert/strict';
import { newApiKey } from '../../src/domain/api-keys.js';
import { after, backends, before, test } from '../support/backends.js';
import { assertError } from '../support/error-body.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

/**
 * On every backend. The suites about the HTTP layer alone (validation, scopes, conditional requests,
 * routing errors, properties) run on SQLite (backends.ts, httpLayerBackends); what of them reads the
 * database is here once per backend: a 304 from the stored row's ETag, a scoped key read back, a refused
 * body that stores nothing.
 */
for (const backend of backends) {
  backend.describe(`smoke (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ backend });
    });
    after(() => server.close());

    test('when a pet is created, then it can be listed and fetched', async () => {
      const created = await server.request('POST', '/v1/pets', { body: { name: 'Rex', categoryId: 1 } });
      assert.equal(created.status, 201);
      const pet = created.json<{ id: number }>();
      assert.deepEqual(pet, { id: pet.id, name: 'Rex', categoryId: 1, status: 'available' });
      const list = await server.request('GET', '/v1/pets');
      assert.deepEqual(list.json(), [pet]);
      const one = await server.request('GET', `/v1/pets/${pet.id}`);
      assert.deepEqual(one.json(), pet);
    });

    test('when a pet and the list are fetched again with their ETags, then 304, until the pet changes hands', async () => {
      const created = await server.request('POST', '/v1/pets', { body: { name: 'Tag', categoryId: 2 } });
      const { id } = created.json<{ id: number }>();
      for (const path of [`/v1/pets/${id}`, '/v1/pets']) {
        const first = await server.request('GET', path);
        const etag = first.headers.get('etag');
        assert.ok(etag, path);
        const again = await server.request('GET', path, { headers: { 'if-none-match': etag } });
        assert.equal(again.status, 304, path);
        assert.equal(again.headers.get('etag'), etag, path);
      }
      const pet = await server.request('GET', `/v1/pets/${id}`);
      const order = await server.request('POST', '/v1/store/orders', { body: { petId: id } });
      assert.equal(order.status, 201, order.text);
      const changed = await server.request('GET', `/v1/pets/${id}`, {
        headers: { 'if-none-match': pet.headers.get('etag') as string },
      });
      assert.equal(changed.status, 200);
      assert.equal(changed.json<{ status: string }>().status, 'pending');
    });

    test('when a key with only pets:read is stored, then it reads pets, and a write is 403 insufficient_scope', async () => {
      const key = newApiKey('reader', new Date(), { scopes: ['pets:read'] });
      await server.storage.apiKeys.insert(key.record);
      const read = await server.request('GET', '/v1/pets', { key: key.secret });
      assert.equal(read.status, 200, read.text);
      const write = await server.request('POST', '/v1/pets', {
        key: key.secret,
        body: { name: 'Nope', categoryId: 1 },
      });
      assertError(
        write,
        403,
        'forbidden',
        'this API key does not have the scope pets:write, which this operation needs',
      );
    });

    test('when a body is refused, then 400 and nothing is stored', async () => {
      const before = await server.storage.pets.count();
      const res = await server.request('POST', '/v1/pets', { body: { name: '', categoryId: 1 } });
      assert.equal(res.status, 400, res.text);
      assert.equal(await server.storage.pets.count(), before);
    });
  });
}
