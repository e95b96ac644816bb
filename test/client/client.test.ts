import assert from 'node:assert/strict';
import { type Pet, PetstoreClient, PetstoreError } from '../../src/client/index.js';
import { after, backends, before, test } from '../support/backends.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

for (const backend of backends) {
  backend.describe(`typed client (${backend.name})`, () => {
    let server: TestServer;
    let client: PetstoreClient;
    before(async () => {
      server = await startTestServer({ backend });
      client = new PetstoreClient({ baseUrl: `${server.url}/v1`, apiKey: TEST_KEY });
    });
    after(() => server.close());

    test('when a pet is created, then the client returns it with int64 fields exact as bigint', async () => {
      const pet = await client.createPet({ name: 'Rex', categoryId: 2n ** 63n - 1n, status: 'sold' });
      assert.equal(typeof pet.id, 'bigint');
      assert.deepEqual(pet, { id: pet.id, name: 'Rex', categoryId: 2n ** 63n - 1n, status: 'sold' });
      assert.deepEqual(await client.getPet(pet.id), pet);
    });

    test('when a number is sent for categoryId, then it is accepted and read back as bigint', async () => {
      const pet = await client.createPet({ name: 'Tom', categoryId: 7 });
      assert.equal(pet.categoryId, 7n);
      assert.equal(pet.status, 'available');
    });

    test('when pets span several pages, then listAllPets follows Link next and yields each once, in order', async () => {
      const created: Pet[] = [];
      for (let i = 0; i < 11; i++)
        created.push(await client.createPet({ name: `page-${i}`, categoryId: i, status: 'pending' }));
      const first = await client.listPets({ status: 'pending', limit: 4 });
      assert.deepEqual(first.pets, created.slice(0, 4));
      assert.equal(first.next?.limit, 4);
      assert.equal(first.next?.status, 'pending');
      assert.equal(typeof first.next?.cursor, 'string');

      const walked: Pet[] = [];
      for await (const pet of client.listAllPets({ status: 'pending', limit: 4 })) walked.push(pet);
      assert.deepEqual(walked, created);
    });

    test('when the service refuses a request, then a PetstoreError carries its code, status and message', async () => {
      await assert.rejects(
        client.createPet({ name: '', categoryId: 1 }),
        (error: unknown) =>
          error instanceof PetstoreError &&
          error.code === 'invalid_request' &&
          error.status === 400 &&
          error.message === 'name must be at least 1 character long',
      );
      await assert.rejects(
        client.getPet(9_999_999n),
        (error: unknown) =>
          error instanceof PetstoreError && error.code === 'not_found' && error.status === 404,
      );
      const anonymous = new PetstoreClient({ baseUrl: `${server.url}/v1`, apiKey: 'not-a-key' });
      await assert.rejects(
        anonymous.listPets(),
        (error: unknown) =>
          error instanceof PetstoreError && error.code === 'unauthorized' && error.status === 401,
      );
    });
  });
}
