import assert from 'node:assert/strict';
import type { Order } from '../../src/domain/order.js';
import { INT64_MAX, INT64_MIN, PET_STATUSES, type Pet } from '../../src/domain/pet.js';
import type { ApiKeyRecord, Storage } from '../../src/domain/storage.js';
import { compareData, orderBatches, petBatches } from '../../src/storage/copy-data.js';
import { after, backends, before, sqlite, type TestDatabase, test } from '../support/backends.js';
import { runInProcess } from '../support/cli.js';
import { createPet } from '../support/storage.js';

const PET_COUNT = 3_000;

/** Pets as a long-lived SQLite database holds them: gaps in the ids, every status, awkward values. */
const seedPets: Pet[] = Array.from({ length: PET_COUNT }, (_, i) => ({
  id: BigInt(1 + i * 3),
  name: [`pet ${i}`, `  Ünïcödé 猫 🐈‍⬛ ${i}  `, `"quoted", {braced} \\ ${i}`, 'NULL', 'x'.repeat(255)][
    i % 5
  ] as string,
  categoryId: [BigInt(i), INT64_MAX - BigInt(i), INT64_MIN + BigInt(i), 2n ** 53n + 1n][i % 4] as bigint,
  status: PET_STATUSES[i % PET_STATUSES.length] as Pet['status'],
}));

/**
 * Orders that agree with those pets, as the service leaves them: a placed order for each pending pet, a
 * delivered one for each sold pet, a cancelled one for every third available pet; ids with gaps too.
 */
const ORDER_FOR: Record<Pet['status'], Order['status'] | undefined> = {
  pending: 'placed',
  sold: 'delivered',
  available: 'cancelled',
};
const seedOrders: Order[] = seedPets
  .filter((pet, i) => pet.status !== 'available' || i % 9 === 0)
  .map((pet, i) => ({
    id: BigInt(10 + i * 2),
    petId: pet.id,
    status: ORDER_FOR[pet.status] as Order['status'],
    placedAt: new Date(Date.UTC(2026, 0, 1) + i * 1_001),
  }));

const seedKeys: ApiKeyRecord[] = [
  {
    id: 'key_active',
    name: 'automation',
    hash: 'a'.repeat(64),
    hint: 'wxyz',
    scopes: ['pets:read', 'orders:read'],
    createdAt: new Date('2026-01-02T03:04:05.678Z'),
    expiresAt: new Date('2030-01-01T00:00:00.000Z'),
    revokedAt: undefined,
    lastUsedAt: new Date('2026-01-05T00:00:00.000Z'),
  },
  {
    id: 'key_revoked',
    name: 'old laptop',
    hash: 'b'.repeat(64),
    hint: 'abcd',
    scopes: ['pets:read', 'pets:write', 'orders:read', 'orders:write'],
    createdAt: new Date('2026-02-03T04:05:06.789Z'),
    expiresAt: undefined,
    revokedAt: new Date('2026-03-04T05:06:07.890Z'),
    lastUsedAt: undefined,
  },
];

/** The report's line for a table whose every source row is in the target. */
const allInTarget = (table: string, source: number, onlyInTarget: number) =>
  new RegExp(
    `^${table}: ${source} in the source, all in the target; ${onlyInTarget} only in the target \\(kept\\)$`,
    'm',
  );

async function allPets(storage: Storage): Promise<Pet[]> {
  const pets: Pet[] = [];
  for await (const batch of petBatches(storage, 1_000)) pets.push(...batch);
  return pets;
}

async function allOrders(storage: Storage): Promise<Order[]> {
  const orders: Order[] = [];
  for await (const batch of orderBatches(storage, 1_000)) orders.push(...batch);
  return orders;
}

const ORDERS = seedOrders.length;

for (const backend of backends) {
  backend.describe(`petstore migrate-data from SQLite to ${backend.name}`, () => {
    const databases: TestDatabase[] = [];
    const opened: Storage[] = [];
    let source: TestDatabase;
    let target: TestDatabase;

    const open = async (database: TestDatabase) => {
      const storage = await database.open();
      opened.push(storage);
      return storage;
    };
    const migrateData = (to: TestDatabase) =>
      runInProcess(['migrate-data', '--from', source.url, '--to', to.url, '--batch-size', '700']);

    before(async () => {
      source = await sqlite.create();
      target = await backend.create();
      databases.push(source, target);
      const storage = await open(source);
      await storage.pets.importBatch(seedPets);
      await storage.orders.importBatch(seedOrders);
      await storage.apiKeys.importBatch(seedKeys);
    });
    after(async () => {
      for (const storage of opened) await storage.close();
      for (const database of databases) await database.drop();
    });

    test('when a few thousand pets and their orders are copied, then every field of every pet, order and key arrives unchanged', async () => {
      const run = await migrateData(target);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, allInTarget('pets', 3000, 0));
      assert.match(run.stdout, allInTarget('orders', ORDERS, 0));
      assert.match(run.stdout, allInTarget('api keys', 2, 0));
      assert.match(run.stdout, /^every pet, order and API key of the source is in the target$/m);
      assert.match(run.stderr, /^pets: 3000 of 3000 read \(100%\), 3000 written, 0 already there$/m);
      assert.match(
        run.stderr,
        new RegExp(
          `^orders: ${ORDERS} of ${ORDERS} read \\(100%\\), ${ORDERS} written, 0 already there$`,
          'm',
        ),
      );
      assert.doesNotMatch(run.stderr, /\r/, 'plain lines when the output is not a terminal');
      // Not a terminal: each progress line once, the last figures of keys and of pets included.
      const lines = run.stderr.split('\n').filter(Boolean);
      assert.deepEqual(
        lines.filter((line, i) => lines.indexOf(line) !== i),
        [],
        `a line is printed twice:\n${run.stderr}`,
      );

      const copied = await open(target);
      assert.deepEqual(await allPets(copied), seedPets);
      assert.deepEqual(await allOrders(copied), seedOrders);
      assert.deepEqual(await copied.apiKeys.list(), seedKeys);
      assert.equal(await copied.apiKeys.findActiveByHash('b'.repeat(64)), undefined, 'still revoked');
    });

    test('when the databases are given in MIGRATE_FROM_DATABASE_URL and MIGRATE_TO_DATABASE_URL, then it runs as with --from and --to', async () => {
      const run = await runInProcess(['migrate-data', '--batch-size', '700'], {
        MIGRATE_FROM_DATABASE_URL: source.url,
        MIGRATE_TO_DATABASE_URL: target.url,
      });
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stderr, /^pets: 3000 of 3000 read \(100%\), 0 written, 3000 already there$/m);
      assert.match(run.stdout, /^every pet, order and API key of the source is in the target$/m);
    });

    test('when it runs again, then nothing is copied twice and identical pets count as already there', async () => {
      const run = await migrateData(target);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stderr, /^pets: 3000 of 3000 read \(100%\), 0 written, 3000 already there$/m);
      assert.match(
        run.stderr,
        new RegExp(
          `^orders: ${ORDERS} of ${ORDERS} read \\(100%\\), 0 written, ${ORDERS} already there$`,
          'm',
        ),
      );
      assert.match(run.stdout, /^every pet, order and API key of the source is in the target$/m);

      const copied = await open(target);
      assert.deepEqual(await allPets(copied), seedPets);
      assert.deepEqual(await allOrders(copied), seedOrders);
      assert.deepEqual(await copied.apiKeys.list(), seedKeys);
    });

    test('when the copy takes a new pet, then its id comes after every copied one', async () => {
      const copied = await open(target);
      const pet = await createPet(copied, { name: 'first after the move', categoryId: 1n, status: 'sold' });
      assert.ok(pet.id > (seedPets.at(-1) as Pet).id, `new id ${pet.id}`);
    });

    test('when it runs again after the switch, with pets created on the target only and orders placed, delivered and cancelled there, then it keeps them and exits 0', async () => {
      const copied = await open(target);
      const available = seedPets.find((pet) => pet.status === 'available') as Pet;
      const placed = await copied.orders.place({ petId: available.id, at: new Date() });
      assert.equal(placed.outcome, 'placed');
      const [delivered, cancelled] = seedOrders.filter((order) => order.status === 'placed') as [
        Order,
        Order,
      ];
      assert.equal((await copied.orders.settle(delivered.id, 'delivered')).outcome, 'settled');
      assert.equal((await copied.orders.settle(cancelled.id, 'cancelled')).outcome, 'settled');

      const run = await migrateData(target);
      assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
      assert.match(run.stdout, allInTarget('pets', 3000, 1));
      assert.match(run.stdout, allInTarget('orders', ORDERS, 1));
      assert.match(run.stdout, allInTarget('api keys', 2, 0));
      assert.match(run.stdout, /^every pet, order and API key of the source is in the target$/m);
      assert.equal(
        (await copied.pets.findById(delivered.petId))?.status,
        'sold',
        "the target's move is kept",
      );
      assert.equal((await copied.orders.findById(cancelled.id))?.status, 'cancelled');
    });

    test('when it runs again after both sides took pets and one id was taken on both, then it copies the others, names the conflict, overwrites nothing and exits 1', async () => {
      const copied = await open(target);
      const [squatter] = (await allPets(copied)).slice(-1) as [Pet];
      // The old service went on taking pets, and gave out the id the target gave out too.
      const late: Pet[] = [
        { id: squatter.id, name: 'late on SQLite 1', categoryId: 7n, status: 'available' },
        { id: squatter.id + 1n, name: 'late on SQLite 2', categoryId: 8n, status: 'pending' },
        { id: squatter.id + 2n, name: 'late on SQLite 3', categoryId: 9n, status: 'sold' },
      ];
      await (await open(source)).pets.importBatch(late);

      const run = await migrateData(target);
      assert.equal(run.code, 1, `${run.stdout}\n${run.stderr}`);
      assert.match(run.stderr, /^pets: 3003 of 3003 read \(100%\), 2 written, 3001 already there$/m);
      assert.match(
        run.stdout,
        /^pets: 3003 in the source, 3002 in the target, 1 CONFLICTING; 0 only in the target \(kept\)$/m,
      );
      assert.ok(
        run.stdout.includes(
          `conflict: pet ${squatter.id} is {"name":"late on SQLite 1","categoryId":"7","status":"available"} in the source but {"name":"first after the move","categoryId":"1","status":"sold"} in the target; the target's was kept\n`,
        ),
        run.stdout,
      );
      assert.match(
        run.stderr,
        /1 pet of the source was not copied: its id holds a different pet in the target \(listed above\); nothing was overwritten/,
      );
      assert.deepEqual(await copied.pets.findById(squatter.id), squatter, 'never overwritten');
      for (const pet of late.slice(1)) assert.deepEqual(await copied.pets.findById(pet.id), pet, 'copied');
    });

    test('when the target holds a different pet under a copied id, then it says so and exits non-zero', async () => {
      const conflicting = await backend.create();
      databases.push(conflicting);
      const storage = await open(conflicting);
      const squatter: Pet = { ...(seedPets[10] as Pet), name: 'not the same pet' };
      await storage.pets.importBatch([squatter]);

      const run = await migrateData(conflicting);
      assert.equal(run.code, 1, run.stderr);
      assert.match(
        run.stdout,
        /^pets: 3003 in the source, 3002 in the target, 1 CONFLICTING; 0 only in the target \(kept\)$/m,
      );
      assert.match(
        run.stdout,
        new RegExp(
          `^conflict: pet ${squatter.id} is .* in the source but \\{"name":"not the same pet",`,
          'm',
        ),
      );
      assert.deepEqual(
        await storage.pets.findById(squatter.id),
        squatter,
        'an existing pet is never overwritten',
      );
    });

    test('when more than 100 ids conflict, then 100 are listed one per line and the rest counted', async () => {
      const crowded = await backend.create();
      databases.push(crowded);
      const storage = await open(crowded);
      await storage.pets.importBatch(
        seedPets.slice(0, 150).map((pet) => ({ ...pet, name: `other ${pet.id}` })),
      );

      const run = await migrateData(crowded);
      assert.equal(run.code, 1, run.stderr);
      const conflicts = run.stdout.split('\n').filter((line) => line.startsWith('conflict: pet '));
      assert.equal(conflicts.length, 100);
      assert.match(
        conflicts[0] as string,
        /^conflict: pet 1 is \{"name":"pet 0",.*\} in the source but \{"name":"other 1",/,
      );
      assert.match(run.stdout, /^… and 50 more conflicting pets, not listed$/m);
      assert.match(
        run.stderr,
        /150 pets of the source were not copied: their ids hold different pets in the target/,
      );
    });

    test('when the source holds pets the target lacks (they arrived during a copy), then the comparison counts them as missing', async () => {
      const empty = await backend.create();
      databases.push(empty);
      const comparison = await compareData(await open(source), await open(empty), {
        batchSize: 700,
        maxListed: 10,
      });
      assert.equal(comparison.pets.missing, comparison.pets.source);
      assert.equal(comparison.apiKeys.missing, 2);
      assert.equal(comparison.pets.inTarget + comparison.pets.conflicts + comparison.pets.onlyInTarget, 0);
    });

    test('when the source placed, delivered or cancelled orders after a copy, then those animals and orders are listed, no order is copied onto an animal that differs, and it exits 1', async () => {
      const small = await sqlite.create();
      const smallTarget = await backend.create();
      databases.push(small, smallTarget);
      const old = await open(small);
      const pets = await old.pets.createMany(
        Array.from({ length: 3 }, (_, i) => ({
          name: `late ${i}`,
          categoryId: 1n,
          status: 'available' as const,
        })),
      );
      const first = await old.orders.place({ petId: (pets[0] as Pet).id, at: new Date() });
      const run = (to: TestDatabase) =>
        runInProcess(['migrate-data', '--from', small.url, '--to', to.url, '--batch-size', '2']);
      assert.equal((await run(smallTarget)).code, 0);

      // The old service went on: it delivered the order copied as placed, and placed a new one.
      const firstOrder = (first as { order: Order }).order;
      await old.orders.settle(firstOrder.id, 'delivered');
      const second = await old.orders.place({ petId: (pets[1] as Pet).id, at: new Date() });
      const again = await run(smallTarget);
      assert.equal(again.code, 1, `${again.stdout}\n${again.stderr}`);
      assert.match(
        again.stderr,
        /^orders: 2 of 2 read \(100%\), 0 written, 0 already there, 2 left out \(their animal differs\)$/m,
      );
      assert.match(
        again.stdout,
        /^pets: 3 in the source, 1 in the target, 2 CONFLICTING; 0 only in the target \(kept\)$/m,
      );
      assert.match(
        again.stdout,
        /^orders: 2 in the source, 0 in the target, 1 CONFLICTING, 1 MISSING; 0 only in the target \(kept\)$/m,
      );
      assert.match(
        again.stdout,
        new RegExp(
          `^conflict: order ${firstOrder.id} is \\{"petId":"${firstOrder.petId}","status":"delivered",.*\\} in the source but \\{.*"status":"placed",.*\\} in the target; the target's was kept$`,
          'm',
        ),
      );
      const secondOrder = (second as { order: Order }).order;
      assert.match(
        again.stdout,
        new RegExp(`^missing: order ${secondOrder.id} is .* in the source, not in the target$`, 'm'),
      );
      assert.match(
        again.stderr,
        /1 order differs between the source and the target \(listed above\); 1 order of the source is not in the target/,
      );
      const copied = await open(smallTarget);
      assert.equal(
        await copied.orders.findById(secondOrder.id),
        undefined,
        'not copied onto an available animal',
      );
      assert.equal((await copied.pets.findById((pets[1] as Pet).id))?.status, 'available');
    });
  });
}
