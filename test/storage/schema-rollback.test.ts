import assert from 'node:assert/strict';
import { POSTGRES_MIGRATIONS } from '../../src/storage/postgres/migrations.js';
import { SchemaTooNewError } from '../../src/storage/schema-version.js';
import { SQLITE_MIGRATIONS } from '../../src/storage/sqlite/migrations.js';
import { VERSION } from '../../src/version.js';
import { backends, type TestDatabase, test } from '../support/backends.js';
import { oneLineFailure, runCli, runInProcess } from '../support/cli.js';
import { executeSql, queryDatabase } from '../support/db-inspect.js';
import { allDocsOnOneLine } from '../support/docs.js';

/** How far ahead of this build the "newer release" migrated: a few versions, as a real rollback might be. */
const AHEAD = 4;

for (const backend of backends) {
  const sqlite = backend.name === 'sqlite';
  const known = (sqlite ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS).length;
  const newer = known + AHEAD;

  /** A database this build migrated, holding one pet, then moved on by a newer release to `newer`. */
  async function migratedByNewerRelease(database: TestDatabase): Promise<void> {
    const storage = await database.open();
    await storage.pets.create({ pet: { name: 'Rex', categoryId: 1n, status: 'available' } });
    await storage.close();
    await executeSql(
      database.url,
      sqlite
        ? `PRAGMA user_version = ${newer}`
        : `INSERT INTO schema_migrations (version) SELECT generate_series(${known + 1}, ${newer})`,
    );
  }

  const schemaVersion = async (database: TestDatabase) =>
    Number(
      (
        await queryDatabase<{ version: number }>(
          database.url,
          sqlite
            ? 'SELECT user_version AS version FROM pragma_user_version'
            : 'SELECT max(version) AS version FROM schema_migrations',
        )
      )[0]?.version,
    );

  const refusal = new RegExp(
    `^the database schema is at version ${newer}, newer than the version ${known} this build \\(petstore ${VERSION.replaceAll('.', '\\.')}\\) knows: a newer release migrated it; run that release again, or restore the backup taken before the upgrade$`,
  );

  backend.describe(`a rollback onto a schema a newer release migrated (${backend.name})`, () => {
    test('when the storage is opened, then it refuses with both versions, and leaves the schema and the data as they were', async (t) => {
      const database = await backend.create();
      t.after(() => database.drop());
      await migratedByNewerRelease(database);

      await assert.rejects(database.open(), (error: Error) => {
        assert.ok(error instanceof SchemaTooNewError);
        assert.equal(error.found, newer);
        assert.equal(error.known, known);
        assert.match(error.message, refusal);
        return true;
      });
      assert.equal(await schemaVersion(database), newer);
      assert.deepEqual(
        (await queryDatabase<{ name: string }>(database.url, 'SELECT name FROM pets')).map((row) => row.name),
        ['Rex'],
      );
    });

    test('when petstore migrate runs, then it exits non-zero with one line naming both versions, and migrates nothing', async (t) => {
      const database = await backend.create();
      t.after(() => database.drop());
      await migratedByNewerRelease(database);
      const line = oneLineFailure(await runInProcess(['migrate'], { DATABASE_URL: database.url }));
      assert.match(line.replace(/^petstore: /, ''), refusal);
      assert.match(line, /^petstore: /);
      assert.equal(await schemaVersion(database), newer);
    });

    test('when petstore serve starts, alone or with workers, then it refuses to start: non-zero, one line naming both versions, nothing served', async (t) => {
      const database = await backend.create();
      t.after(() => database.drop());
      await migratedByNewerRelease(database);
      for (const args of [['serve'], ['serve', '--workers', '2']]) {
        const result = await runCli(args, {
          DATABASE_URL: database.url,
          PORT: '0',
          PETSTORE_API_KEYS: 'rollback-test-key-0123456789',
          RATE_LIMIT_PER_SECOND: '0', // no warning about per-worker budgets: the one line is the refusal
        });
        const line = oneLineFailure(result);
        assert.match(line.replace(/^petstore: /, ''), refusal, args.join(' '));
      }
      assert.equal(await schemaVersion(database), newer);
    });
  });
}

test('when the docs quote a rollback refusal, then it is the line the service prints, versions aside', () => {
  const quoted = /e\.g\. `(petstore: the database schema is at version \d+[^`]*)…`/.exec(
    allDocsOnOneLine(),
  )?.[1];
  assert.ok(quoted, 'the docs quote the refusal');
  const [, found, known] = /version (\d+), newer than the version (\d+)/.exec(quoted) ?? [];
  const printed = `petstore: ${new SchemaTooNewError(Number(found), Number(known)).message}`;
  assert.ok(
    printed.startsWith(quoted.replace(/\(petstore [^)]+\)/, `(petstore ${VERSION})`)),
    `${printed}\ndoes not start with\n${quoted}`,
  );
});
