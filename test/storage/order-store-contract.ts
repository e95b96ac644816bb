import assert from 'node:assert/strict';
import type { Order, OrderSettlement } from '../../src/domain/order.js';
import type { Pet, PetStatus } from '../../src/domain/pet.js';
import type { IdempotencyClaim, Storage } from '../../src/domain/storage.js';
import { after, type Backend, before, type TestDatabase, test } from '../support/backends.js';
import { executeSql } from '../support/db-inspect.js';
import { createPet } from '../support/storage.js';

const AT = new Date('2026-11-23T09:30:00.123Z');

const claim = (key: string, requestHash: string): IdempotencyClaim => ({
  apiKeyHash: 'caller',
  key,
  requestHash,
  at: AT,
  expiredBefore: new Date(AT.getTime() - 1000),
});

/**
 * What every adapter's OrderStore must do, invariants first. One database for the suite (each test
 * makes the animals it needs), and a second connection to it standing for another node.
 */
export function orderStoreContract(backend: Backend): void {
  backend.describe(`order store contract (${backend.name})`, () => {
    let database: TestDatabase;
    let storage: Storage;
    let other: Storage;

    before(async () => {
      database = await backend.create();
      storage = await database.open();
      other = await database.open();
    });
    after(async () => {
      await other?.close();
      await storage?.close();
      await database?.drop();
    });

    const animal = (status: PetStatus = 'available', name = 'ordered') =>
      createPet(storage, { name, categoryId: 1n, status });
    const petStatus = async (pet: Pet) => (await storage.pets.findById(pet.id))?.status;
    const place = async (pet: Pet, store = storage) => {
      const placed = await store.orders.place({ petId: pet.id, at: AT });
      assert.equal(placed.outcome, 'placed');
      return (placed as { order: Order }).order;
    };

    test('when an order is placed for an available animal, then it is stored placed with every field, and the animal is pending', async () => {
      const pet = await animal();
      const placed = await storage.orders.place({ petId: pet.id, at: AT });
      assert.equal(placed.outcome, 'placed');
      const { order } = placed as { order: Order };
      assert.deepEqual(order, { id: order.id, petId: pet.id, status: 'placed', placedAt: AT });
      assert.deepEqual(await other.orders.findById(order.id), order);
      assert.equal(await petStatus(pet), 'pending');
    });

    test('when an order is placed for an unknown, pending or sold animal, then it is refused with the reason and nothing changes', async () => {
      const before = await storage.orders.count();
      assert.deepEqual(await storage.orders.place({ petId: 987_654_321n, at: AT }), {
        outcome: 'unknown_pet',
      });
      for (const status of ['pending', 'sold'] as const) {
        const pet = await animal(status);
        assert.deepEqual(await storage.orders.place({ petId: pet.id, at: AT }), {
          outcome: 'pet_not_available',
          petStatus: status,
        });
        assert.equal(await petStatus(pet), status);
      }
      assert.equal(await storage.orders.count(), before);
    });

    test('when orders are delivered and cancelled, then each moves from placed once, its animal with it, and asking again changes nothing', async () => {
      for (const [to, other_, petAfter] of [
        ['delivered', 'cancelled', 'sold'],
        ['cancelled', 'delivered', 'available'],
      ] as const) {
        const pet = await animal();
        const order = await place(pet);
        assert.deepEqual(await storage.orders.settle(order.id, to), {
          outcome: 'settled',
          order: { ...order, status: to },
        });
        assert.equal(await petStatus(pet), petAfter);
        assert.deepEqual(await storage.orders.settle(order.id, to), {
          outcome: 'unchanged',
          order: { ...order, status: to },
        });
        assert.deepEqual(await storage.orders.settle(order.id, other_), {
          outcome: 'conflict',
          order: { ...order, status: to },
        });
        assert.equal(await petStatus(pet), petAfter, 'a refused move leaves the animal alone');
      }
      assert.deepEqual(await storage.orders.settle(987_654_321n, 'delivered'), { outcome: 'unknown_order' });
    });

    test('when 24 placements for one animal race on two connections, then exactly one is placed and the database holds one placed order', async () => {
      const pet = await animal();
      const results = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          (i % 2 ? other : storage).orders.place({ petId: pet.id, at: AT }),
        ),
      );
      assert.equal(results.filter((r) => r.outcome === 'placed').length, 1);
      assert.deepEqual(
        results.filter((r) => r.outcome !== 'placed'),
        Array(23).fill({ outcome: 'pet_not_available', petStatus: 'pending' }),
      );
      const stored = await storage.orders.list({ afterId: 0n, petId: pet.id, limit: 100 });
      assert.deepEqual(
        stored.map((o) => o.status),
        ['placed'],
      );
      assert.equal(await petStatus(pet), 'pending');
    });

    test('when deliveries and cancellations of one order race on two connections, then one move wins and order and animal agree', async () => {
      for (let round = 0; round < 6; round++) {
        const pet = await animal();
        const order = await place(pet);
        const moves = Array.from(
          { length: 8 },
          (_, i): OrderSettlement => (i % 4 < 2 ? 'delivered' : 'cancelled'),
        );
        const results = await Promise.all(
          moves.map((to, i) => (i % 2 ? other : storage).orders.settle(order.id, to)),
        );
        assert.equal(results.filter((r) => r.outcome === 'settled').length, 1, `round ${round}: one move`);
        const final = (await storage.orders.findById(order.id)) as Order;
        assert.equal(await petStatus(pet), final.status === 'delivered' ? 'sold' : 'available');
        // Every other request saw the winner's move: the same one unchanged, the other one a conflict.
        for (const [i, result] of results.entries()) {
          if (result.outcome === 'settled') assert.equal(moves[i], final.status);
          else assert.equal(result.outcome, moves[i] === final.status ? 'unchanged' : 'conflict');
        }
      }
    });

    test('when a second placed order for an animal is written past the store, then the database itself refuses it', async () => {
      const pet = await animal();
      await place(pet);
      await assert.rejects(
        executeSql(
          database.url,
          `INSERT INTO orders (pet_id, status, placed_at) VALUES (${pet.id}, 'placed', ${database.url.startsWith('sqlite:') ? '0' : 'now()'})`,
        ),
        /UNIQUE|unique/,
      );
      await assert.rejects(
        executeSql(database.url, `UPDATE orders SET status = 'shipped' WHERE pet_id = ${pet.id}`),
        /CHECK|check/,
      );
    });

    test('when placements carry Idempotency-Keys, then a key places once, replays its order, and a refused placement records nothing', async () => {
      const pet = await animal();
      const first = await storage.orders.place({ petId: pet.id, at: AT, idempotency: claim('k1', 'h1') });
      assert.equal(first.outcome, 'placed');
      const again = await other.orders.place({ petId: pet.id, at: AT, idempotency: claim('k1', 'h1') });
      assert.deepEqual(again, {
        outcome: 'replayed',
        order: (first as { order: Order }).order,
        requestHash: 'h1',
      });

      const sold = await animal('sold');
      const refused = await storage.orders.place({ petId: sold.id, at: AT, idempotency: claim('k2', 'h2') });
      assert.deepEqual(refused, { outcome: 'pet_not_available', petStatus: 'sold' });
      const free = await animal();
      const reused = await storage.orders.place({ petId: free.id, at: AT, idempotency: claim('k2', 'h3') });
      assert.equal(reused.outcome, 'placed', 'the refused request left the key unused');
    });

    test('when an Idempotency-Key of createPet is sent to placeOrder, then it is a key of its own there', async () => {
      const created = await storage.pets.create({
        pet: { name: 'keyed', categoryId: 1n, status: 'available' },
        idempotency: claim('shared', 'pet-hash'),
      });
      const placed = await storage.orders.place({
        petId: created.pet.id,
        at: AT,
        idempotency: claim('shared', 'order-hash'),
      });
      assert.equal(placed.outcome, 'placed');
    });

    test('when listing, then orders come in ascending id order after the keyset position, by status and by animal', async () => {
      const pets = [await animal(), await animal(), await animal()];
      const orders = [await place(pets[0] as Pet), await place(pets[1] as Pet)];
      await storage.orders.settle((orders[0] as Order).id, 'cancelled');
      orders.push(await place(pets[0] as Pet), await place(pets[2] as Pet));
      const mine = (await storage.orders.list({ afterId: 0n, limit: 1000 })).filter((o) =>
        pets.some((p) => p.id === o.petId),
      );
      assert.deepEqual(
        mine.map((o) => o.id),
        orders.map((o) => o.id),
      );
      const forFirst = await storage.orders.list({ afterId: 0n, petId: (pets[0] as Pet).id, limit: 10 });
      assert.deepEqual(
        forFirst.map((o) => [o.id, o.status]),
        [
          [(orders[0] as Order).id, 'cancelled'],
          [(orders[2] as Order).id, 'placed'],
        ],
      );
      assert.deepEqual(
        await storage.orders.list({ afterId: 0n, petId: (pets[0] as Pet).id, status: 'placed', limit: 10 }),
        [orders[2]],
      );
      assert.deepEqual(
        await storage.orders.list({ afterId: (orders[0] as Order).id, petId: (pets[0] as Pet).id, limit: 1 }),
        [orders[2]],
      );
      const cancelled = await storage.orders.list({ afterId: 0n, status: 'cancelled', limit: 1000 });
      assert.ok(cancelled.every((o) => o.status === 'cancelled'));
      assert.ok(cancelled.some((o) => o.id === (orders[0] as Order).id));
    });

    test('when orders are created in bulk, then each animal takes the status its order implies', async () => {
      const pets = [await animal(), await animal(), await animal()];
      const statuses = ['placed', 'delivered', 'cancelled'] as const;
      const created = await storage.orders.createMany(
        pets.map((pet, i) => ({ petId: pet.id, status: statuses[i] as Order['status'], placedAt: AT })),
      );
      assert.deepEqual(
        created.map((o) => [o.petId, o.status]),
        pets.map((p, i) => [p.id, statuses[i]]),
      );
      assert.ok((created[1] as Order).id > (created[0] as Order).id);
      for (const order of created) assert.deepEqual(await storage.orders.findById(order.id), order);
      assert.deepEqual(await Promise.all(pets.map(petStatus)), ['pending', 'sold', 'available']);
    });

    test('when orders are imported, then ids and fields are kept, taken ids, second placed orders and absent animals are left out, and later orders come after them', async () => {
      const pets = [await animal('pending'), await animal('sold')];
      const existing = await place(await animal());
      const imported: Order[] = [
        { id: existing.id, petId: (pets[1] as Pet).id, status: 'delivered', placedAt: AT },
        { id: 70_000n, petId: (pets[0] as Pet).id, status: 'placed', placedAt: AT },
        { id: 70_001n, petId: (pets[0] as Pet).id, status: 'placed', placedAt: AT },
        { id: 70_002n, petId: (pets[1] as Pet).id, status: 'delivered', placedAt: new Date(0) },
        { id: 70_003n, petId: 999_999_999n, status: 'cancelled', placedAt: AT },
      ];
      assert.equal(await storage.orders.importBatch(imported), 2);
      assert.deepEqual(await storage.orders.findById(existing.id), existing, 'never overwritten');
      assert.deepEqual(await storage.orders.findById(70_000n), imported[1]);
      assert.equal(await storage.orders.findById(70_001n), undefined, 'a second placed order is left out');
      assert.deepEqual(await storage.orders.findById(70_002n), imported[3]);
      assert.equal(
        await storage.orders.findById(70_003n),
        undefined,
        'an order of an absent animal is left out',
      );
      assert.equal(await petStatus(pets[0] as Pet), 'pending', 'animals are left as they are');
      assert.equal(await storage.orders.importBatch(imported), 0, 'importing again changes nothing');
      const next = await place(await animal());
      assert.ok(next.id > 70_002n, `a new order's id (${next.id}) comes after every imported one`);
    });
  });
}
