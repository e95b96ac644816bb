import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { BetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import { SQLITE_MIGRATIONS } from '../../src/storage/sqlite/migrations.js';
import { killAllCliProcesses, runInProcess } from '../support/cli.js';
import { createKey, integrityCheck, listKeys, newDatabase } from '../support/cli-commands.js';

/** `petstore migrate`. */

after(() => killAllCliProcesses());

describe('petstore migrate', { concurrency: 4 }, () => {
  const latest = SQLITE_MIGRATIONS.length;

  test('when migrate runs on a new database, then it says it created the schema, where, exits 0 and the database is ready', async (t) => {
    const db = newDatabase(t);
    const result = await runInProcess(['migrate'], { DATABASE_URL: db.url });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stderr, `created the database schema (version ${latest}): ${db.path}\n`);
    assert.equal(integrityCheck(db), 'ok');
    const list = await runInProcess(['keys', 'list'], { DATABASE_URL: db.url });
    assert.equal(list.stdout, 'no keys\n');
  });

  test('when migrate runs again, then it exits 0 and keeps the data', async (t) => {
    const db = newDatabase(t);
    assert.equal((await runInProcess(['migrate'], { DATABASE_URL: db.url })).code, 0);
    const secret = await createKey(db, 'ci');
    const again = await runInProcess(['migrate'], { DATABASE_URL: db.url });
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stderr, `the database schema is already up to date (version ${latest}): ${db.path}\n`);
    const keys = await listKeys(db);
    assert.deepEqual(
      keys.map((k) => [k.name, k.key, k.revokedAt]),
      [['ci', `pst_…${secret.slice(-4)}`, null]],
    );
  });

  test('when migrate runs on a database an older version left, then it says from which version to which', async (t) => {
    const db = newDatabase(t);
    const old = new BetterSqlite3(db.path);
    old.exec(SQLITE_MIGRATIONS[0] as string);
    old.pragma('user_version = 1');
    old.close();
    const result = await runInProcess(['migrate'], { DATABASE_URL: db.url });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stderr, `migrated the database schema from version 1 to ${latest}: ${db.path}\n`);
  });
});
