import assert from 'node:assert/strict';
import { API_KEY_SCOPES, newApiKey } from '../../src/domain/api-keys.js';
import { POSTGRES_MIGRATIONS } from '../../src/storage/postgres/migrations.js';
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
