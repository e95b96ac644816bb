import assert from 'node:assert/strict';
import { POSTGRES_MIGRATIONS } from '../../src/storage/postgres/migrations.js';
import { SQLITE_MIGRATIONS } from '../../src/storage/sqlite/migrations.js';
import { backends, cleanUpInReverse, test } from '../support/backends.js';
import { executeSql, queryDatabase } from '../support/db-inspect.js';
import { startTestServer } from '../support/test-server.js';

/** The schema version before events recorded what caused them (the trace context). */
const BEFORE_TRACE_CONTEXT = 6;

for (const backend of backends) {
  backend.describe(`the trace context migration on an existing database (${backend.name})`, () => {
    test('when a database with events from before it is opened, then each event gains an empty cause and is served exactly as before', async (t) => {
      const database = await backend.create();
      const later = cleanUpInReverse(t);
      later(() => database.drop());
      const sqlite = backend.name === 'sqlite';
      const migrations = sqlite ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS;
      assert.match(migrations[BEFORE_TRACE_CONTEXT] as string, /ADD COLUMN trace_context/i);
      const data = '{"id":1,"name":"Old","categoryId":1,"status":"available"}';
      // Recent enough that the retention (30 days) keeps it.
      const at = new Date(Date.now() - 3_600_000);
      await executeSql(
        database.url,
        [
          ...migrations.slice(0, BEFORE_TRACE_CONTEXT),
          ...(sqlite
            ? [
                `PRAGMA user_version = ${BEFORE_TRACE_CONTEXT}`,
                `INSERT INTO events (id, type, occurred_at, data) VALUES (1, 'pet.created', ${at.getTime()}, '${data}')`,
              ]
            : [
                'CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
                'INSERT INTO schema_migrations (version) VALUES (1), (2), (3), (4), (5), (6)',
                `INSERT INTO events (id, type, occurred_at, data) VALUES (1, 'pet.created', '${at.toISOString()}', '${data}')`,
              ]),
        ].join(';\n'),
      );

      const storage = await database.open();
      // From there to the newest: the versions after it apply too.
      assert.deepEqual(storage.schema, { from: BEFORE_TRACE_CONTEXT, to: migrations.length });
      await storage.close();
      assert.deepEqual(await queryDatabase(database.url, 'SELECT id, trace_context FROM events'), [
        { id: sqlite ? 1 : '1', trace_context: null },
      ]);

      const server = await startTestServer({ database });
      later(() => server.close());
      const event = await server.request('GET', '/v1/events/1');
      assert.equal(event.status, 200);
      assert.equal(
        event.text,
        `{"id":1,"type":"pet.created","occurredAt":"${at.toISOString()}","data":${data}}`,
      );
    });
  });
}
