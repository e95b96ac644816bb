import assert from 'node:assert/strict';
import { POSTGRES_MIGRATIONS } from '../../src/storage/postgres/migrations.js';
import { SQLITE_MIGRATIONS } from '../../src/storage/sqlite/migrations.js';
import { backends, cleanUpInReverse, test } from '../support/backends.js';
import { executeSql, queryDatabase, storedPets, tableNames } from '../support/db-inspect.js';

/** The schema version before the Store: pets, keys, idempotency keys and the readiness probe. */
const BEFORE_ORDERS = 3;

/** A database as the service left it before orders existed, holding pets, keys and an Idempotency-Key. */
async function databaseBeforeOrders(url: string): Promise<void> {
  const sqlite = url.startsWith('sqlite:');
  const migrations = (sqlite ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS).slice(0, BEFORE_ORDERS);
  const versions = sqlite
    ? [`PRAGMA user_version = ${BEFORE_ORDERS}`]
    : [
        'CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
        'INSERT INTO schema_migrations (version) VALUES (1), (2), (3)',
      ];
  const created = sqlite ? '1767225600000' : "'2026-01-01T00:00:00Z'";
  await executeSql(
    url,
    [
      ...migrations,
      ...versions,
      `INSERT INTO pets (id, name, category_id, status) VALUES
         (1, 'Rex', 1, 'available'), (2, 'Tom', 9223372036854775807, 'sold'), (7, 'Luna', 3, 'pending')`,
      `INSERT INTO api_keys (id, name, hash, hint, created_at, revoked_at) VALUES
         ('key_a', 'ci', '${'a'.repeat(64)}', 'wxyz', '2026-01-02T03:04:05.678Z', NULL)`,
      `INSERT INTO idempotency_keys (api_key_hash, key, request_hash, pet_id, created_at)
         VALUES ('${'a'.repeat(64)}', 'k', 'h', 1, ${created})`,
    ].join(';\n'),
  );
}

for (const backend of backends) {
  backend.describe(`the orders migration on an existing database (${backend.name})`, () => {
    test('when a database from before the Store is opened, then it is migrated to the latest version, its pets and keys untouched, and orders work on its animals', async (t) => {
      const database = await backend.create();
      const later = cleanUpInReverse(t);
      later(() => database.drop());
      await databaseBeforeOrders(database.url);
      const petsBefore = await storedPets(database.url);
      const keysBefore = await queryDatabase(
        database.url,
        'SELECT id, name, hash, hint, created_at, revoked_at FROM api_keys ORDER BY id',
      );
      const idempotencyBefore = await queryDatabase(database.url, 'SELECT * FROM idempotency_keys');

      const storage = await database.open();
      later(() => storage.close());
      const latest = (backend.name === 'sqlite' ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS).length;
      assert.deepEqual(storage.schema, { from: BEFORE_ORDERS, to: latest });
      assert.ok((await tableNames(database.url)).includes('orders'));
      assert.deepEqual(await storedPets(database.url), petsBefore);
      assert.deepEqual(
        await queryDatabase(
          database.url,
          'SELECT id, name, hash, hint, created_at, revoked_at FROM api_keys ORDER BY id',
        ),
        keysBefore,
      );
      assert.deepEqual(
        await queryDatabase(database.url, 'SELECT * FROM idempotency_keys'),
        idempotencyBefore,
      );
      assert.equal((await storage.apiKeys.findActiveByHash('a'.repeat(64)))?.id, 'key_a');

      const placed = await storage.orders.place({ petId: 1n, at: new Date() });
      assert.equal(placed.outcome, 'placed');
      assert.equal((await storage.pets.findById(1n))?.status, 'pending');
      assert.deepEqual(await storage.orders.place({ petId: 7n, at: new Date() }), {
        outcome: 'pet_not_available',
        petStatus: 'pending',
      });
    });
  });
}
