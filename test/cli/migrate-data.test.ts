import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { INT64_MAX, INT64_MIN, PET_STATUSES, type Pet } from '../../src/domain/pet.js';
import { petBatches } from '../../src/storage/copy-data.js';
import type { ApiKeyRecord, Storage } from '../../src/storage/storage.js';
import { backends, sqlite, type TestDatabase } from '../support/backends.js';
import { runCli } from '../support/cli.js';

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

const seedKeys: ApiKeyRecord[] = [
  {
    id: 'key_active',
    name: 'automation',
    hash: 'a'.repeat(64),
    hint: 'wxyz',
    createdAt: new Date('2026-01-02T03:04:05.678Z'),
    revokedAt: undefined,
  },
  {
    id: 'key_revoked',
    name: 'old laptop',
    hash: 'b'.repeat(64),
    hint: 'abcd',
    createdAt: new Date('2026-02-03T04:05:06.789Z'),
    revokedAt: new Date('2026-03-04T05:06:07.890Z'),
  },
];

async function allPets(storage: Storage): Promise<Pet[]> {
  const pets: Pet[] = [];
  for await (const batch of petBatches(storage, 1_000)) pets.push(...batch);
  return pets;
}

for (const backend of backends) {
  describe(`petstore migrate-data from SQLite to ${backend.name}`, () => {
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
      runCli(['migrate-data', '--from', source.url, '--to', to.url, '--batch-size', '700']);

    before(async () => {
      source = await sqlite.create();
      target = await backend.create();
      databases.push(source, target);
      const storage = await open(source);
      await storage.pets.importBatch(seedPets);
      await storage.apiKeys.importBatch(seedKeys);
    });
    after(async () => {
      for (const storage of opened) await storage.close();
      for (const database of databases) await database.drop();
    });

    test('when a few thousand pets are copied, then every field of every pet and key arrives unchanged', async () => {
      const run = await migrateData(target);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /^pets: source 3000 \(sha256 (\w+)\), target 3000 \(sha256 \1\): identical$/m);
      assert.match(run.stdout, /^api keys: source 2 .*: identical$/m);
      assert.match(run.stderr, /^pets: 3000 of 3000 read \(100%\), 3000 written, 0 already there$/m);
      assert.doesNotMatch(run.stderr, /\r/, 'plain lines when the output is not a terminal');

      const copied = await open(target);
      assert.deepEqual(await allPets(copied), seedPets);
      assert.deepEqual(await copied.apiKeys.list(), seedKeys);
      assert.equal(await copied.apiKeys.findActiveByHash('b'.repeat(64)), undefined, 'still revoked');
    });

    test('when it runs again, then nothing is copied twice and both sides stay identical', async () => {
      const run = await migrateData(target);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stderr, /^pets: 3000 of 3000 read \(100%\), 0 written, 3000 already there$/m);
      assert.match(run.stdout, /^both databases hold the same pets and API keys$/m);

      const copied = await open(target);
      assert.deepEqual(await allPets(copied), seedPets);
      assert.deepEqual(await copied.apiKeys.list(), seedKeys);
    });

    test('when the copy takes a new pet, then its id comes after every copied one', async () => {
      const copied = await open(target);
      const pet = await copied.pets.create({ name: 'first after the move', categoryId: 1n, status: 'sold' });
      assert.ok(pet.id > (seedPets.at(-1) as Pet).id, `new id ${pet.id}`);
    });

    test('when the target holds a different pet under a copied id, then it says so and exits non-zero', async () => {
      const conflicting = await backend.create();
      databases.push(conflicting);
      const storage = await open(conflicting);
      const squatter: Pet = { ...(seedPets[10] as Pet), name: 'not the same pet' };
      await storage.pets.importBatch([squatter]);

      const run = await migrateData(conflicting);
      assert.equal(run.code, 1, run.stderr);
      assert.match(run.stdout, /^pets: source 3000 .*, target 3000 .*: DIFFERENT$/m);
      assert.match(run.stderr, /the databases differ after copying \(pets\)/);
      assert.deepEqual(
        await storage.pets.findById(squatter.id),
        squatter,
        'an existing pet is never overwritten',
      );
    });
  });
}
