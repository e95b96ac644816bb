import assert from 'node:assert/strict';
import { after, backends, before, test } from '../support/backends.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

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
  });
}
