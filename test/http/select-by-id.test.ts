import assert from 'node:assert/strict';
import { after, backends, before, describe, test } from '../support/backends.js';
import { assertError } from '../support/error-body.js';
import { addAnimal, type OrderBody, placeOrder } from '../support/orders.js';
import { createPets, cursorOf, nextHref, type PetBody } from '../support/paging.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

/** An id beyond 2^53, where a JavaScript number would round it to its neighbour 9007199254740992. */
const BEYOND_2_53 = 9007199254740993n;

const idQuery = (ids: readonly (number | bigint | string)[]) => ids.map((id) => `id=${id}`).join('&');
const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

for (const backend of backends) {
  backend.describe(`listPets and listOrders by id (${backend.name})`, () => {
    describe('listPets', () => {
      let server: TestServer;
      let pets: PetBody[];
      before(async () => {
        server = await startTestServer({ backend });
        pets = await createPets(server, 10); // ids 1..10: available, pending, sold, available, …
        // An animal whose id is beyond 2^53, as migrate-data would bring it (ids kept).
        await server.storage.pets.importBatch([
          { id: BEYOND_2_53, name: 'Big', categoryId: 1n, status: 'available' },
        ]);
      });
      after(() => server.close());

      const pet = (id: number) => pets[id - 1] as PetBody;

      test('when several ids are given in any order, then those animals come back in ascending id order, a bare array without Link', async () => {
        const res = await server.request('GET', `/v1/pets?${idQuery([9, 2, 5])}`);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.json(), [pet(2), pet(5), pet(9)]);
        assert.equal(res.headers.get('link'), null);
      });

      test('when one id is given, then the answer is that animal alone, as getPet gave it', async () => {
        const res = await server.request('GET', '/v1/pets?id=7');
        assert.equal(res.status, 200);
        assert.deepEqual(res.json(), [pet(7)]);
        const old = await server.request('GET', '/v1/pets/7');
        assert.deepEqual(res.json(), [old.json()]);
      });

      test('when some ids do not exist, then they are simply absent; when none does, then the answer is []', async () => {
        const some = await server.request('GET', `/v1/pets?${idQuery([2, 999, 4, 123456789])}`);
        assert.equal(some.status, 200);
        assert.deepEqual(some.json(), [pet(2), pet(4)]);
        const none = await server.request('GET', `/v1/pets?${idQuery([999, 1000])}`);
        assert.equal(none.status, 200);
        assert.equal(none.text, '[]');
      });

      test('when an id is repeated, then its animal comes back once', async () => {
        const res = await server.request('GET', `/v1/pets?${idQuery([3, 3, 3])}`);
        assert.deepEqual(res.json(), [pet(3)]);
      });

      test('when ids are combined with status, then only those of the ids that have the status come back', async () => {
        const res = await server.request('GET', `/v1/pets?${idQuery(range(1, 6))}&status=available`);
        assert.equal(res.status, 200);
        assert.deepEqual(res.json(), [pet(1), pet(4)]);
        const sold = await server.request('GET', `/v1/pets?status=sold&${idQuery([1, 3, 4])}`);
        assert.deepEqual(sold.json(), [pet(3)]);
      });

      test('when an id beyond 2^53 is given, then exactly that animal comes back, and its rounded neighbour selects nothing', async () => {
        const res = await server.request('GET', `/v1/pets?id=${BEYOND_2_53}`);
        assert.equal(res.status, 200);
        assert.equal(res.text, `[{"id":${BEYOND_2_53},"name":"Big","categoryId":1,"status":"available"}]`);
        const neighbour = await server.request(
          'GET',
          `/v1/pets?${idQuery([BEYOND_2_53 - 1n, BEYOND_2_53 + 1n])}`,
        );
        assert.equal(neighbour.text, '[]');
      });

      test('when 100 ids are given, then 200; when 101, then 400 naming id and the limit', async () => {
        const hundred = await server.request('GET', `/v1/pets?limit=100&${idQuery(range(1, 100))}`);
        assert.equal(hundred.status, 200, hundred.text);
        assert.equal(hundred.json<PetBody[]>().length, 10);
        const more = await server.request('GET', `/v1/pets?${idQuery(range(1, 101))}`);
        assertError(more, 400, 'invalid_request', 'id must NOT have more than 100 items');
      });

      for (const [label, raw, message] of [
        ['abc', 'abc', 'id.0 must be an integer'],
        ['1.5', '1.5', 'id.0 must be an integer'],
        ['empty', '', 'id.0 must be an integer'],
        ['0', '0', 'id.0 must be at least 1'],
        ['2^63', '9223372036854775808', 'id.0 must be at most 9223372036854775807'],
      ] as const) {
        test(`when an id is ${label}, then 400 invalid_request naming it`, async () => {
          const res = await server.request('GET', `/v1/pets?id=${raw}`);
          assertError(res, 400, 'invalid_request', message);
        });
      }

      test('when one of several ids is bad, then 400 names which', async () => {
        const res = await server.request('GET', '/v1/pets?id=1&id=abc');
        assertError(res, 400, 'invalid_request', 'id.1 must be an integer');
      });

      test('when more ids are selected than limit, then the page holds the first ones and next repeats the ids; following it gives the rest, once each', async () => {
        const first = await server.request('GET', `/v1/pets?limit=2&${idQuery([5, 1, 3, 9, 7])}`);
        assert.deepEqual(first.json(), [pet(1), pet(3)]);
        const href = nextHref(first);
        assert.match(href ?? '', /^\/v1\/pets\?limit=2&id=1&id=3&id=5&id=7&id=9&cursor=[^&]+$/);
        const second = await server.request('GET', href as string);
        assert.deepEqual(second.json(), [pet(5), pet(7)]);
        const third = await server.request('GET', nextHref(second) as string);
        assert.deepEqual(third.json(), [pet(9)]);
        assert.equal(third.headers.get('link'), null);
      });

      test('when a cursor issued for some ids is used with other ids, or with none, then 400 naming cursor', async () => {
        const first = await server.request('GET', `/v1/pets?limit=1&${idQuery([1, 2])}`);
        const cursor = cursorOf(nextHref(first) as string);
        const same = await server.request('GET', `/v1/pets?limit=1&id=2&id=1&cursor=${cursor}`);
        assert.deepEqual(same.json(), [pet(2)], 'the same set, spelt in another order');
        for (const other of [`id=1&id=3&cursor=${cursor}`, `cursor=${cursor}`]) {
          const res = await server.request('GET', `/v1/pets?limit=1&${other}`);
          assertError(res, 400, 'invalid_request', 'cursor does not belong to these filters');
        }
      });
    });

    describe('listOrders', () => {
      let server: TestServer;
      let orders: OrderBody[];
      before(async () => {
        server = await startTestServer({ backend });
        orders = [];
        for (let i = 0; i < 4; i++) orders.push(await placeOrder(server, await addAnimal(server)));
        const delivered = await server.request('POST', `/v1/store/orders/${orders[1]?.id}/deliver`);
        orders[1] = delivered.json<OrderBody>();
        // An order whose id is beyond 2^53, as migrate-data would bring it (ids kept).
        const petId = BigInt(await addAnimal(server, 'pending'));
        await server.storage.orders.importBatch([
          { id: BEYOND_2_53, petId, status: 'placed', placedAt: new Date('2026-11-26T00:00:00.000Z') },
        ]);
      });
      after(() => server.close());

      const order = (i: number) => orders[i] as OrderBody;

      test('when several ids are given, then those orders that exist come back in ascending id order', async () => {
        const res = await server.request('GET', `/v1/store/orders?${idQuery([4, 99, 1])}`);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.json(), [order(0), order(3)]);
        assert.equal(res.headers.get('link'), null);
      });

      test('when ids are combined with status and petId, then only those matching every filter come back', async () => {
        const delivered = await server.request(
          'GET',
          `/v1/store/orders?${idQuery([1, 2, 3])}&status=delivered`,
        );
        assert.deepEqual(delivered.json(), [order(1)]);
        const forPet = await server.request(
          'GET',
          `/v1/store/orders?${idQuery([1, 2])}&petId=${order(0).petId}`,
        );
        assert.deepEqual(forPet.json(), [order(0)]);
      });

      test('when an id beyond 2^53 is given, then exactly that order comes back', async () => {
        const res = await server.request('GET', `/v1/store/orders?id=${BEYOND_2_53}&id=${BEYOND_2_53 - 1n}`);
        assert.equal(res.status, 200);
        assert.match(res.text, new RegExp(`^\\[\\{"id":${BEYOND_2_53},"petId":\\d+,"status":"placed",`));
        assert.equal(res.json<unknown[]>().length, 1);
      });

      test('when 101 ids or a bad one are given, then 400 naming id', async () => {
        assertError(
          await server.request('GET', `/v1/store/orders?${idQuery(range(1, 101))}`),
          400,
          'invalid_request',
          'id must NOT have more than 100 items',
        );
        assertError(
          await server.request('GET', '/v1/store/orders?id=abc'),
          400,
          'invalid_request',
          'id.0 must be an integer',
        );
      });

      test('when more ids are selected than limit, then next repeats them and the walk gives each once', async () => {
        const first = await server.request('GET', `/v1/store/orders?limit=2&${idQuery([3, 1, 2])}`);
        assert.deepEqual(first.json(), [order(0), order(1)]);
        const href = nextHref(first) as string;
        assert.match(href, /^\/v1\/store\/orders\?limit=2&id=1&id=2&id=3&cursor=[^&]+$/);
        const second = await server.request('GET', href);
        assert.deepEqual(second.json(), [order(2)]);
        assert.equal(second.headers.get('link'), null);
      });
    });
  });
}
