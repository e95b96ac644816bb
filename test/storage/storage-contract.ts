import assert from 'node:assert/strict';
import type { Pet } from '../../src/domain/pet.js';
import { INT64_MAX, INT64_MIN } from '../../src/domain/pet.js';
import type { ApiKeyRecord, Storage } from '../../src/domain/storage.js';
import { afterEach, type Backend, beforeEach, type TestDatabase, test } from '../support/backends.js';
import { executeSql, queryDatabase } from '../support/db-inspect.js';
import { createPet, serialisedAs } from '../support/storage.js';

const key = (id: string, hash: string): ApiKeyRecord => ({
  id,
  name: `key ${id}`,
  hash,
  hint: 'abcd',
  scopes: ['pets:read', 'pets:write', 'orders:read', 'orders:write'],
  createdAt: new Date('2026-01-02T03:04:05.678Z'),
  expiresAt: undefined,
  revokedAt: undefined,
  lastUsedAt: undefined,
});

/**
 * What every storage adapter must do. Each adapter's test file calls this with its backend; the suite
 * itself knows nothing of any database.
 */
export function storageContract(backend: Backend): void {
  backend.describe(`storage contract (${backend.name})`, () => {
    let database: TestDatabase;
    let storage: Storage;
    const opened: Storage[] = [];

    beforeEach(async () => {
      database = await backend.create();
      storage = await database.open();
      opened.push(storage);
    });
    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close();
      await database.drop();
    });

    test('when a new database is opened, then its schema was created; opened again, it was already up to date', async () => {
      const { to } = storage.schema;
      assert.ok(to >= 1);
      assert.deepEqual(storage.schema, { from: 0, to });
      const again = await database.open();
      opened.push(again);
      assert.deepEqual(again.schema, { from: to, to });
    });

    test('when pets are created, then ids are assigned in ascending order and every field reads back', async () => {
      const a = await createPet(storage, { name: 'Rex', categoryId: 1n, status: 'available' });
      const b = await createPet(storage, { name: 'Tom', categoryId: 2n, status: 'sold' });
      assert.ok(a.id >= 1n && b.id > a.id);
      assert.deepEqual(await storage.pets.findById(a.id), {
        id: a.id,
        name: 'Rex',
        categoryId: 1n,
        status: 'available',
      });
      assert.deepEqual(await storage.pets.findById(b.id), b);
    });

    test('when several pets are created at once, then each gets an ascending id, in order, and reads back', async () => {
      const first = await createPet(storage, { name: 'before', categoryId: 1n, status: 'available' });
      const input = Array.from({ length: 250 }, (_, i) => ({
        name: `bulk ${i}`,
        categoryId: BigInt(i) * 2n ** 40n,
        status: (['available', 'pending', 'sold'] as const)[i % 3] ?? 'sold',
      }));
      const created = await storage.pets.createMany(input);
      assert.deepEqual(
        created.map(({ id: _, ...rest }) => rest),
        input,
      );
      let previous = first.id;
      for (const pet of created) {
        assert.ok(pet.id > previous, 'ids ascend in input order');
        previous = pet.id;
      }
      assert.deepEqual(await storage.pets.list({ afterId: first.id, limit: 1000 }), created);
      assert.deepEqual(await storage.pets.createMany([]), []);
    });

    test('when many pets are created concurrently, then each caller gets its own pet, ids are unique and all read back', async () => {
      const input = Array.from({ length: 100 }, (_, i) => ({
        name: `concurrent ${i}`,
        categoryId: BigInt(i),
        status: (['available', 'pending', 'sold'] as const)[i % 3] ?? 'sold',
      }));
      const created = await Promise.all(input.map((pet) => createPet(storage, pet)));
      assert.deepEqual(
        created.map(({ id: _, ...rest }) => rest),
        input,
      );
      assert.equal(new Set(created.map((pet) => pet.id)).size, input.length);
      for (const pet of created) assert.deepEqual(await storage.pets.findById(pet.id), pet);
    });

    test('when creates with and without Idempotency-Keys arrive together, on two connections, then each key creates once and the rest create each', async () => {
      const other = await database.open();
      opened.push(other);
      const at = new Date('2026-05-06T07:08:09.000Z');
      const claim = (apiKeyHash: string, key: string, requestHash: string) => ({
        apiKeyHash,
        key,
        requestHash,
        at,
        expiredBefore: new Date(at.getTime() - 1000),
      });
      const pet = { name: 'keyed', categoryId: 7n, status: 'available' as const };
      const creations = Array.from({ length: 24 }, (_, i) => ({
        // Keys "k0" and "k1" of one caller, each sent 8 times over both connections; 8 creates without a key.
        pet: { ...pet, name: `n${i}` },
        idempotency: i % 3 === 2 ? undefined : claim('caller-a', `k${i % 3}`, `hash-k${i % 3}`),
      }));
      const results = await Promise.all(
        creations.map((creation, i) => (i % 2 === 0 ? storage : other).pets.create(creation)),
      );
      for (const key of ['k0', 'k1']) {
        const mine = results.filter((_, i) => creations[i]?.idempotency?.key === key);
        assert.equal(mine.length, 8);
        assert.equal(mine.filter((r) => !r.replayed).length, 1, `${key} created exactly once`);
        assert.equal(new Set(mine.map((r) => r.pet.id)).size, 1, `every ${key} request got the same pet`);
        assert.ok(mine.every((r) => r.requestHash === `hash-${key}`));
      }
      const plain = results.filter((_, i) => creations[i]?.idempotency === undefined);
      assert.equal(plain.length, 8);
      assert.ok(plain.every((r) => !r.replayed));
      assert.equal(await storage.pets.count(), 8 + 2, 'one pet per key and one per create without a key');

      const sameKeyOtherCaller = await storage.pets.create({
        pet,
        idempotency: claim('caller-b', 'k0', 'x'),
      });
      assert.equal(sameKeyOtherCaller.replayed, false, "one caller's key never meets another's");
      const expired = await storage.pets.create({
        pet,
        idempotency: { ...claim('caller-a', 'k0', 'new'), expiredBefore: new Date(at.getTime() + 1) },
      });
      assert.equal(expired.replayed, false, 'an expired record is replaced');
      assert.equal(expired.requestHash, 'new');
      assert.equal(await storage.pets.count(), 12);
    });

    test('when categoryId is at the int64 limits, then it is stored exactly', async () => {
      for (const categoryId of [INT64_MAX, INT64_MIN, 2n ** 53n + 1n, -(2n ** 53n) - 1n, 0n]) {
        const pet = await createPet(storage, { name: 'x', categoryId, status: 'pending' });
        assert.equal((await storage.pets.findById(pet.id))?.categoryId, categoryId);
      }
    });

    test('when a name holds any Unicode text, then it reads back byte for byte', async () => {
      for (const name of [
        '  padded  ',
        'Ünïcödé 猫 🐈‍⬛',
        "Robert'); DROP TABLE pets;--",
        'a'.repeat(255),
        '%_\\',
      ]) {
        const pet = await createPet(storage, { name, categoryId: 1n, status: 'available' });
        assert.equal((await storage.pets.findById(pet.id))?.name, name);
      }
    });

    test('when an id does not exist, then findById gives undefined', async () => {
      assert.equal(await storage.pets.findById(1n), undefined);
      assert.equal(await storage.pets.findById(INT64_MAX), undefined);
    });

    test('when listing, then pets come in ascending id order after the keyset position, at most limit', async () => {
      const pets = [];
      for (let i = 0; i < 7; i++) {
        pets.push(
          await createPet(storage, {
            name: `p${i}`,
            categoryId: BigInt(i),
            status: i % 2 ? 'sold' : 'available',
          }),
        );
      }
      assert.deepEqual(await storage.pets.list({ afterId: 0n, limit: 100 }), pets);
      assert.deepEqual(await storage.pets.list({ afterId: 0n, limit: 3 }), pets.slice(0, 3));
      assert.deepEqual(await storage.pets.list({ afterId: pets[2]?.id ?? 0n, limit: 3 }), pets.slice(3, 6));
      assert.deepEqual(await storage.pets.list({ afterId: pets[6]?.id ?? 0n, limit: 3 }), []);
      assert.deepEqual(
        await storage.pets.list({ afterId: 0n, status: 'sold', limit: 100 }),
        pets.filter((p) => p.status === 'sold'),
      );
      assert.deepEqual(await storage.pets.list({ afterId: pets[1]?.id ?? 0n, status: 'sold', limit: 1 }), [
        pets[3],
      ]);
      assert.deepEqual(await storage.pets.list({ afterId: 0n, status: 'pending', limit: 10 }), []);
    });

    test('when a page or a pet is read as JSON, then it is byte for byte what the response schema serialises for the same rows, int64 beyond 2^53 included', async () => {
      // Ids and category ids a double cannot hold; names with what JSON must escape, or may leave as is.
      const names = [
        'Rex',
        'say "woof"',
        'back\\slash \\u0041 / slash',
        'Zoë 🐕 the 柴犬',
        'line\u2028separator\u2029',
        '</script><b>&amp;',
        ' padded ',
        "it's",
        '\u{1F600}\u00A0\u200B\uFEFF',
      ];
      const pets: Pet[] = names.map((name, i) => ({
        id: 2n ** 53n + 1n + BigInt(i) * 2n ** 56n,
        name,
        categoryId: [INT64_MIN, INT64_MAX, -(2n ** 53n) - 1n, 0n, 2n ** 53n + 1n][i % 5] as bigint,
        status: (['available', 'pending', 'sold'] as const)[i % 3] as Pet['status'],
      }));
      pets.push({ id: INT64_MAX, name: 'the last', categoryId: 1n, status: 'sold' });
      assert.equal(await storage.pets.importBatch(pets), pets.length);

      for (const pet of pets) {
        assert.equal(await storage.pets.findJsonById(pet.id), await serialisedAs('Pet', pet), pet.name);
      }
      assert.equal(await storage.pets.findJsonById(1n), undefined);
      for (const query of [
        { afterId: 0n, limit: 100 },
        { afterId: 0n, limit: 3 },
        { afterId: pets[2]?.id as bigint, limit: 4 },
        { afterId: 0n, status: 'sold' as const, limit: 2 },
        { afterId: 0n, status: 'pending' as const, limit: 100 },
        { afterId: INT64_MAX, limit: 20 },
        { afterId: (pets.at(-2) as Pet).id, limit: 1 },
      ]) {
        const rows = await storage.pets.list({ ...query, limit: query.limit + 1 });
        const page = rows.slice(0, query.limit);
        const json = await storage.pets.listJson(query);
        assert.equal(json.json, await serialisedAs('Pets', page), JSON.stringify(query, String));
        assert.equal(
          json.lastIdIfMore,
          rows.length > query.limit ? page.at(-1)?.id : undefined,
          JSON.stringify(query, String),
        );
      }
    });

    test('when the storage is reopened, then everything written is still there', async () => {
      const pet = await createPet(storage, { name: 'kept', categoryId: 5n, status: 'sold' });
      await storage.apiKeys.insert(key('key_1', 'h1'));
      const secret = await storage.sharedSecret('cursor');
      await storage.close();
      storage = await database.open();
      opened.push(storage);
      assert.deepEqual(await storage.pets.findById(pet.id), pet);
      assert.equal((await storage.apiKeys.findActiveByHash('h1'))?.id, 'key_1');
      assert.deepEqual(await storage.sharedSecret('cursor'), secret);
    });

    test('when several nodes open a fresh database at once, then each migrates safely and all share its rows', async () => {
      const fresh = await backend.create();
      const nodes: Storage[] = [];
      try {
        nodes.push(...(await Promise.all([1, 2, 3, 4].map(() => fresh.open()))));
        const created = await Promise.all(
          nodes.map((node, i) => createPet(node, { name: `n${i}`, categoryId: BigInt(i), status: 'sold' })),
        );
        assert.equal(new Set(created.map((pet) => pet.id)).size, nodes.length, 'ids are unique across nodes');
        for (const node of nodes) {
          assert.deepEqual(
            await node.pets.list({ afterId: 0n, limit: 10 }),
            [...created].sort((a, b) => (a.id < b.id ? -1 : 1)),
          );
        }
      } finally {
        for (const node of nodes) await node.close();
        await fresh.drop();
      }
    });

    test('when two connections ask for a shared secret, then both get the same one', async () => {
      const other = await database.open();
      opened.push(other);
      const [a, b] = await Promise.all([storage.sharedSecret('cursor'), other.sharedSecret('cursor')]);
      assert.ok(a.length >= 32);
      assert.deepEqual(a, b);
      assert.notDeepEqual(await storage.sharedSecret('another'), a);
    });

    test('when keys are inserted, listed and revoked, then only active keys are found by hash', async () => {
      assert.equal(await storage.apiKeys.count(), 0);
      await storage.apiKeys.insert(key('key_a', 'hash-a'));
      await storage.apiKeys.insert({
        ...key('key_b', 'hash-b'),
        createdAt: new Date('2026-02-01T00:00:00Z'),
      });
      assert.equal(await storage.apiKeys.count(), 2);
      assert.deepEqual(await storage.apiKeys.findActiveByHash('hash-a'), key('key_a', 'hash-a'));
      assert.equal(await storage.apiKeys.findActiveByHash('nope'), undefined);

      const at = new Date('2026-03-01T00:00:00Z');
      assert.equal(await storage.apiKeys.revoke('key_a', at), true);
      assert.equal(await storage.apiKeys.revoke('key_a', at), false, 'a revoked key cannot be revoked again');
      assert.equal(await storage.apiKeys.revoke('key_missing', at), false);
      assert.equal(await storage.apiKeys.findActiveByHash('hash-a'), undefined);
      assert.equal(
        await storage.apiKeys.count(),
        2,
        'revoked keys still count: the first-start key is not recreated',
      );

      const listed = await storage.apiKeys.list();
      assert.deepEqual(
        listed.map((k) => [k.id, k.revokedAt?.toISOString()]),
        [
          ['key_a', at.toISOString()],
          ['key_b', undefined],
        ],
      );
    });

    test('when a key has fewer scopes and an expiry, then both are stored and read back as they were', async () => {
      const scoped: ApiKeyRecord = {
        ...key('key_scoped', 'hash-scoped'),
        scopes: ['pets:read', 'orders:write'],
        expiresAt: new Date('2027-03-31T00:00:00.123Z'),
      };
      const none: ApiKeyRecord = { ...key('key_none', 'hash-none'), scopes: [] };
      await storage.apiKeys.insert(scoped);
      await storage.apiKeys.insert(none);
      assert.deepEqual(await storage.apiKeys.findActiveByHash('hash-scoped'), scoped);
      assert.deepEqual(await storage.apiKeys.findActiveByHash('hash-none'), none);
      // Found though past its expiry: expiry is judged by the verifier's clock, not the database's.
      const expired: ApiKeyRecord = {
        ...key('key_old', 'hash-old'),
        expiresAt: new Date('2020-01-01T00:00:00Z'),
      };
      await storage.apiKeys.insert(expired);
      assert.deepEqual(await storage.apiKeys.findActiveByHash('hash-old'), expired);
    });

    test('when last uses are recorded, then each key keeps its latest, and an earlier one does not go back', async () => {
      await storage.apiKeys.insert(key('key_a', 'hash-a'));
      await storage.apiKeys.insert(key('key_b', 'hash-b'));
      const noon = new Date('2026-06-01T12:00:00.000Z');
      const later = new Date('2026-06-01T12:01:30.500Z');
      await storage.apiKeys.recordLastUse([
        { hash: 'hash-a', at: noon },
        { hash: 'hash-unknown', at: noon },
      ]);
      await storage.apiKeys.recordLastUse([{ hash: 'hash-a', at: later }]);
      await storage.apiKeys.recordLastUse([{ hash: 'hash-a', at: noon }]); // another node, behind
      const lastUsed = Object.fromEntries(
        (await storage.apiKeys.list()).map((k) => [k.id, k.lastUsedAt?.toISOString()]),
      );
      assert.deepEqual(lastUsed, { key_a: later.toISOString(), key_b: undefined });
      await storage.apiKeys.recordLastUse([]);
      assert.equal(await storage.apiKeys.count(), 2, 'a use of an unknown key stores nothing');
    });

    test('when pets are imported, then their ids and fields are kept and later creates come after them', async () => {
      const created = await createPet(storage, {
        name: 'already here',
        categoryId: 1n,
        status: 'available',
      });
      const imported: Pet[] = [
        { id: created.id, name: 'a different pet with a taken id', categoryId: 9n, status: 'sold' },
        {
          id: 1_000n,
          name: 'Ünïcödé 🐈‍⬛ "quoted" \\ {braces}, commas',
          categoryId: INT64_MAX,
          status: 'pending',
        },
        { id: 5_000_000_000n, name: '  padded  ', categoryId: INT64_MIN, status: 'sold' },
        { id: 20n, name: 'NULL', categoryId: -(2n ** 53n) - 1n, status: 'available' },
      ];
      assert.equal(await storage.pets.importBatch(imported), 3, 'the pet whose id is taken is skipped');
      assert.deepEqual(await storage.pets.findById(created.id), created, 'an existing pet is left as it is');
      const expected = [created, ...imported.slice(1)].sort((a, b) => (a.id < b.id ? -1 : 1));
      assert.deepEqual(await storage.pets.list({ afterId: 0n, limit: 100 }), expected);
      assert.equal(await storage.pets.count(), 4);

      assert.equal(await storage.pets.importBatch(imported), 0, 'importing again changes nothing');
      assert.equal(await storage.pets.importBatch([]), 0);
      assert.deepEqual(await storage.pets.list({ afterId: 0n, limit: 100 }), expected);

      const next = await createPet(storage, { name: 'after', categoryId: 2n, status: 'sold' });
      assert.ok(next.id > 5_000_000_000n, `a new pet's id (${next.id}) comes after every imported one`);
    });

    test('when keys are imported, then hashes, scopes, expiry and last use are kept, revocations carry over and none is revived', async () => {
      const revokedAt = new Date('2026-04-05T06:07:08.901Z');
      const a = {
        ...key('key_a', 'hash-a'),
        scopes: ['orders:read' as const],
        expiresAt: new Date('2027-01-01T00:00:00.000Z'),
        lastUsedAt: new Date('2026-03-03T03:03:03.303Z'),
      };
      const b = { ...key('key_b', 'hash-b'), revokedAt };
      assert.equal(await storage.apiKeys.importBatch([a, b]), 2);
      assert.deepEqual(await storage.apiKeys.list(), [a, b]);
      assert.equal(await storage.apiKeys.importBatch([a, b]), 0, 'importing again changes nothing');

      assert.equal(await storage.apiKeys.importBatch([{ ...a, revokedAt }]), 1, 'a revocation carries over');
      assert.equal(await storage.apiKeys.findActiveByHash('hash-a'), undefined);
      assert.equal(await storage.apiKeys.importBatch([a]), 0, 'a revoked key is not brought back');
      assert.deepEqual(await storage.apiKeys.list(), [
        { ...a, revokedAt },
        { ...b, revokedAt },
      ]);
    });

    test('when the database answers, then ping resolves having committed its write (a database that reads but cannot write is not ready)', async () => {
      const probeRows = () => queryDatabase<{ id: unknown }>(database.url, 'SELECT id FROM readiness_probe');
      assert.deepEqual(await probeRows(), [], 'a fresh database has not been probed');
      await storage.ping();
      assert.deepEqual(
        (await probeRows()).map((row) => Number(row.id)),
        [1],
        'the probe row, seen from another connection',
      );
    });

    test('when a group commit fails in the database, then every create waiting on it gets the error and none of them is stored', async () => {
      // A trigger refusing one row: the batch's one transaction fails in the database itself.
      await executeSql(
        database.url,
        backend.name === 'sqlite'
          ? `CREATE TRIGGER refuse_pet BEFORE INSERT ON pets WHEN NEW.name = 'refused'
             BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END`
          : `CREATE FUNCTION refuse_pet() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN IF NEW.name = 'refused' THEN RAISE EXCEPTION 'refused by a trigger'; END IF; RETURN NEW; END $$;
             CREATE TRIGGER refuse_pet BEFORE INSERT ON pets FOR EACH ROW EXECUTE FUNCTION refuse_pet()`,
      );
      // Asked in one event-loop turn: the three share one commit.
      const results = await Promise.allSettled(
        ['before', 'refused', 'after'].map((name) =>
          createPet(storage, { name, categoryId: 1n, status: 'available' }),
        ),
      );
      const reasons = results.map((result) => (result.status === 'rejected' ? result.reason : result.value));
      for (const [i, reason] of reasons.entries()) {
        assert.ok(
          reason instanceof Error,
          `create ${i} was rejected: ${JSON.stringify(reason, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`,
        );
        assert.match(reason.message, /refused by a trigger/, `create ${i}`);
      }
      assert.equal(reasons[0], reasons[2], 'one error: one transaction');
      assert.deepEqual(
        await queryDatabase(database.url, 'SELECT name FROM pets'),
        [],
        'nothing of the batch is stored',
      );
      assert.equal(await storage.pets.count(), 0);

      // The writer is not stuck: the next batch commits.
      const next = await createPet(storage, { name: 'next', categoryId: 1n, status: 'available' });
      assert.deepEqual(await storage.pets.findById(next.id), next);
    });
  });
}
