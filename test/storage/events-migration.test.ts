import assert from 'node:assert/strict';
import { API_KEY_SCOPES, newApiKey } from '../../src/domain/api-keys.js';
import { EVENT_TYPES } from '../../src/domain/events.js';
import { POSTGRES_MIGRATIONS } from '../../src/storage/postgres/migrations.js';
import { MIGRATED_EVENT_TYPES } from '../../src/storage/sql.js';
import { SQLITE_MIGRATIONS } from '../../src/storage/sqlite/migrations.js';
import { backends, cleanUpInReverse, test } from '../support/backends.js';
import { executeSql } from '../support/db-inspect.js';
import { startTestServer } from '../support/test-server.js';

/** The schema version before events and webhooks. */
const BEFORE_EVENTS = 5;

for (const backend of backends) {
  backend.describe(`the events and webhooks migration on an existing database (${backend.name})`, () => {
    test('when a database from before events is opened, then keys that had all four scopes get all seven, narrower keys keep exactly theirs, and the feed starts empty', async (t) => {
      const database = await backend.create();
      const later = cleanUpInReverse(t);
      later(() => database.drop());
      const sqlite = backend.name === 'sqlite';
      const migrations = sqlite ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS;
      assert.match(migrations[BEFORE_EVENTS] as string, /CREATE TABLE events/, 'the migration under test');
      const full = newApiKey('had all four', new Date());
      const narrow = newApiKey('reads only', new Date());
      const scopes = (list: string[]) =>
        sqlite ? `'${list.join(' ')}'` : `ARRAY[${list.map((s) => `'${s}'`).join(', ')}]`;
      await executeSql(
        database.url,
        [
          ...migrations.slice(0, BEFORE_EVENTS),
          ...(sqlite
            ? [`PRAGMA user_version = ${BEFORE_EVENTS}`]
            : [
                'CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
                'INSERT INTO schema_migrations (version) VALUES (1), (2), (3), (4), (5)',
              ]),
          `INSERT INTO api_keys (id, name, hash, hint, created_at, scopes) VALUES
             ('${full.record.id}', 'full', '${full.record.hash}', '${full.record.hint}', '2026-01-02T03:04:05.678Z',
              ${scopes(['pets:read', 'pets:write', 'orders:read', 'orders:write'])}),
             ('${narrow.record.id}', 'narrow', '${narrow.record.hash}', '${narrow.record.hint}', '2026-01-02T03:04:05.678Z',
              ${scopes(['pets:read', 'orders:read'])})`,
        ].join(';\n'),
      );

      const storage = await database.open();
      assert.deepEqual(storage.schema, { from: BEFORE_EVENTS, to: migrations.length });
      const keys = new Map((await storage.apiKeys.list()).map((k) => [k.id, k.scopes]));
      assert.equal(await storage.events.count(), 0);
      await storage.close();
      assert.deepEqual(keys.get(full.record.id), [...API_KEY_SCOPES]);
      assert.equal(API_KEY_SCOPES.length, 7);
      assert.deepEqual(keys.get(narrow.record.id), ['pets:read', 'orders:read']);

      const server = await startTestServer({ database });
      later(() => server.close());
      assert.equal((await server.request('GET', '/v1/events', { key: full.secret })).text, '[]');
      assert.equal((await server.request('GET', '/v1/webhook-endpoints', { key: full.secret })).status, 200);
      assert.equal((await server.request('GET', '/v1/events', { key: narrow.secret })).status, 403);
    });
  });
}

for (const backend of backends) {
  backend.describe(`the migration that adds webhook_endpoint.disabled (${backend.name})`, () => {
    test('when a database with events, the newest of them deleted, is brought up to date, then every event is kept as it was, ids go on after the deleted ones, and the new type is accepted', async (t) => {
      const database = await backend.create();
      const later = cleanUpInReverse(t);
      later(() => database.drop());
      const sqlite = backend.name === 'sqlite';
      const migrations = sqlite ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS;
      const before = migrations.findIndex((sql) => sql.includes("'webhook_endpoint.disabled'"));
      assert.ok(before > 0, 'the migration under test');
      const events = [1, 2, 3, 4]
        .map((n) => `('pet.created', ${sqlite ? n : `to_timestamp(${n})`}, '{"id":${n}}')`)
        .join(', ');
      await executeSql(
        database.url,
        [
          ...migrations.slice(0, before),
          sqlite
            ? `PRAGMA user_version = ${before}`
            : `CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
               INSERT INTO schema_migrations (version) SELECT generate_series(1, ${before})`,
          `INSERT INTO events (type, occurred_at, data) VALUES ${events}`,
          'DELETE FROM events WHERE id >= 3',
        ].join(';\n'),
      );
      const refused = executeSql(
        database.url,
        `INSERT INTO events (type, occurred_at, data) VALUES ('webhook_endpoint.disabled', ${sqlite ? 5 : 'now()'}, '{}')`,
      );
      await assert.rejects(refused, /CHECK constraint|check constraint/, 'refused before the migration');

      const storage = await database.open();
      later(() => storage.close());
      assert.deepEqual(storage.schema, { from: before, to: migrations.length });
      const kept = await storage.events.list({ afterId: 0n, types: [], limit: 10 });
      assert.deepEqual(
        kept.map((e) => [e.id, e.type, e.occurredAt.getTime(), e.data]),
        [
          [1n, 'pet.created', 1000 * (sqlite ? 0.001 : 1), '{"id":1}'],
          [2n, 'pet.created', 2000 * (sqlite ? 0.001 : 1), '{"id":2}'],
        ],
      );
      await executeSql(
        database.url,
        `INSERT INTO events (type, occurred_at, data) VALUES ('webhook_endpoint.disabled', ${sqlite ? 5 : 'now()'}, '{}')`,
      );
      const [added] = await storage.events.list({ afterId: 2n, types: [], limit: 10 });
      // 5 (SQLite), or 6 (PostgreSQL: the refused insert drew 5 from the sequence): never 3 or 4 again.
      assert.ok((added?.id ?? 0n) > 4n, `after the deleted 3 and 4, no id used twice: ${added?.id}`);
      assert.equal(added?.type, 'webhook_endpoint.disabled');
    });
  });
}

test('the newest event types a migration checks are every type the service records: a new type needs a migration', () => {
  const lists = Object.values(MIGRATED_EVENT_TYPES);
  assert.deepEqual(lists.at(-1), [...EVENT_TYPES]);
});
