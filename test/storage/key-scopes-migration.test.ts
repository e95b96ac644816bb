import assert from 'node:assert/strict';
import { API_KEY_SCOPES, newApiKey } from '../../src/domain/api-keys.js';
import { POSTGRES_MIGRATIONS } from '../../src/storage/postgres/migrations.js';
import { SQLITE_MIGRATIONS } from '../../src/storage/sqlite/migrations.js';
import { backends, cleanUpInReverse, test } from '../support/backends.js';
import { executeSql, queryDatabase } from '../support/db-inspect.js';
import { startTestServer } from '../support/test-server.js';

/** The schema version before key scopes and lifetimes: pets, keys, idempotency keys, the probe, orders. */
const BEFORE_SCOPES = 4;

for (const backend of backends) {
  backend.describe(`the key scopes migration on an existing database (${backend.name})`, () => {
    test('when a database from before scopes is opened, then its keys keep working with every scope, never expire and were never used; a revoked one stays revoked', async (t) => {
      const database = await backend.create();
      const later = cleanUpInReverse(t);
      later(() => database.drop());
      const sqlite = backend.name === 'sqlite';
      const old = newApiKey('from before scopes', new Date('2026-01-02T03:04:05.678Z'));
      const revoked = newApiKey('revoked before scopes', new Date('2026-01-02T03:04:05.678Z'));
      await executeSql(
        database.url,
        [
          ...(sqlite ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS).slice(0, BEFORE_SCOPES),
          ...(sqlite
            ? [`PRAGMA user_version = ${BEFORE_SCOPES}`]
            : [
                'CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
                'INSERT INTO schema_migrations (version) VALUES (1), (2), (3), (4)',
              ]),
          `INSERT INTO api_keys (id, name, hash, hint, created_at, revoked_at) VALUES
             ('${old.record.id}', 'old', '${old.record.hash}', '${old.record.hint}', '2026-01-02T03:04:05.678Z', NULL),
             ('${revoked.record.id}', 'gone', '${revoked.record.hash}', '${revoked.record.hint}', '2026-01-02T03:04:05.678Z', '2026-02-01T00:00:00.000Z')`,
        ].join(';\n'),
      );

      const storage = await database.open();
      const latest = (sqlite ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS).length;
      assert.deepEqual(storage.schema, { from: BEFORE_SCOPES, to: latest });
      const keys = await storage.apiKeys.list();
      await storage.close();
      assert.deepEqual(
        keys.map((k) => [k.id, k.scopes, k.expiresAt, k.lastUsedAt, k.revokedAt?.toISOString()]),
        [
          [old.record.id, [...API_KEY_SCOPES], undefined, undefined, undefined],
          [revoked.record.id, [...API_KEY_SCOPES], undefined, undefined, '2026-02-01T00:00:00.000Z'],
        ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
      );
      // The column's default is no scope at all: a key inserted without scopes can do nothing.
      const defaults = await queryDatabase(
        database.url,
        sqlite
          ? "SELECT dflt_value AS value FROM pragma_table_info('api_keys') WHERE name = 'scopes'"
          : "SELECT column_default AS value FROM information_schema.columns WHERE table_name = 'api_keys' AND column_name = 'scopes' AND table_schema = current_schema()",
      );
      assert.match(String(defaults[0]?.value), sqlite ? /^''$/ : /^'\{\}'::text\[\]$/);

      const server = await startTestServer({ database });
      later(() => server.close());
      const pet = await server.request('POST', '/v1/pets', {
        key: old.secret,
        body: { name: 'Old', categoryId: 1 },
      });
      assert.equal(pet.status, 201, pet.text);
      const order = await server.request('POST', '/v1/store/orders', {
        key: old.secret,
        body: { petId: pet.json<{ id: number }>().id },
      });
      assert.equal(order.status, 201, order.text);
      for (const path of ['/v1/pets', '/v1/store/orders']) {
        assert.equal((await server.request('GET', path, { key: old.secret })).status, 200, path);
        assert.equal((await server.request('GET', path, { key: revoked.secret })).status, 401, path);
      }
    });
  });
}
