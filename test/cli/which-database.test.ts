import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, type TestContext, test } from 'node:test';
import { POSTGRES_UNAVAILABLE, postgres } from '../support/backends.js';
import {
  jsonLines,
  killAllCliProcesses,
  migratedTempDatabase,
  oneLineFailure,
  runCli,
  runInProcess,
  startServe,
  type TempDatabase,
  tempDatabase,
} from '../support/cli.js';

after(() => killAllCliProcesses());

/** An empty directory that is not the repository: where a user who `cd`-ed elsewhere runs a command. */
function elsewhere(t: TestContext): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'petstore-elsewhere-')));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function migrated(t: TestContext): Promise<TempDatabase> {
  const db = await migratedTempDatabase();
  t.after(() => db.remove());
  return db;
}

/** The lines of stderr that say which database a command opened. */
const databaseLines = (stderr: string) => stderr.split('\n').filter((line) => /^database\b/.test(line));

/** The entries of a JSON log that name a database: level, pid and message of each. */
const databaseEntries = (stdout: string) =>
  jsonLines(stdout)
    .filter((entry) => String(entry.msg).startsWith('database'))
    .map(({ level, pid, msg }) => ({ level, pid, msg }));

describe('a command cannot miss its database', { concurrency: 4 }, () => {
  for (const args of [
    ['keys', 'create', '--name', 'x'],
    ['keys', 'list'],
    ['keys', 'revoke', 'key_x'],
    ['seed', '--count', '1'],
  ]) {
    test(`when ${args.join(' ')} runs from another directory with the default DATABASE_URL, then it exits 1 with one line naming the absolute path and DATABASE_URL, and creates nothing`, async (t) => {
      const cwd = elsewhere(t);
      const result = await runCli(args, {}, { cwd });
      assert.equal(result.code, 1);
      assert.equal(
        oneLineFailure(result),
        `petstore: no database at ${join(cwd, 'data/petstore.db')}; set DATABASE_URL to the service's database (e.g. DATABASE_URL=sqlite:/srv/petstore/data/petstore.db), or run \`petstore migrate\` to create this one`,
      );
      assert.deepEqual(readdirSync(cwd), []);
    });
  }

  test('when migrate-data is given a --from file that does not exist, then it exits 1 naming it and --from, and creates neither database', async (t) => {
    const missing = tempDatabase();
    const target = tempDatabase();
    t.after(() => {
      missing.remove();
      target.remove();
    });
    const result = await runInProcess(['migrate-data', '--from', missing.url, '--to', target.url]);
    assert.equal(result.code, 1);
    assert.equal(
      oneLineFailure(result),
      `petstore: no database at ${missing.path}; set --from to the service's database (e.g. --from=sqlite:/srv/petstore/data/petstore.db), or run \`petstore migrate\` to create this one`,
    );
    assert.equal(existsSync(missing.path), false);
    assert.equal(existsSync(target.path), false);
  });

  test('when migrate runs from another directory, then it creates the database there and says so with its absolute path', async (t) => {
    const cwd = elsewhere(t);
    const result = await runCli(['migrate'], {}, { cwd });
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stderr,
      new RegExp(`^created the database schema \\(version \\d+\\): ${join(cwd, 'data/petstore.db')}\\n$`),
    );
    assert.equal(existsSync(join(cwd, 'data/petstore.db')), true);
  });

  for (const args of [
    ['keys', 'create', '--name', 'x'],
    ['keys', 'list'],
    ['keys', 'list', '--json'],
    ['seed', '--count', '1'],
  ]) {
    test(`when ${args.join(' ')} runs, then its stderr names the database it opened, by absolute path, once`, async (t) => {
      const db = await migrated(t);
      const result = await runInProcess(args, { DATABASE_URL: db.url });
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(databaseLines(result.stderr), [`database: ${db.path}`]);
    });
  }

  test('when keys revoke runs, then its stderr names the database it opened first', async (t) => {
    const db = await migrated(t);
    assert.equal((await runInProcess(['keys', 'create', '--name', 'x'], { DATABASE_URL: db.url })).code, 0);
    const listed = await runInProcess(['keys', 'list', '--json'], { DATABASE_URL: db.url });
    const [{ id }] = JSON.parse(listed.stdout) as [{ id: string }];
    const result = await runInProcess(['keys', 'revoke', id], { DATABASE_URL: db.url });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stderr, `database: ${db.path}\nrevoked ${id}\n`);
  });

  test('when migrate-data runs, then its stderr names both databases it opened, and it creates its --to where none was', async (t) => {
    const source = await migrated(t);
    const target = tempDatabase();
    assert.equal(existsSync(target.path), false);
    t.after(() => target.remove());
    const result = await runInProcess(['migrate-data', '--from', source.url, '--to', target.url]);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(databaseLines(result.stderr), [
      `database --from: ${source.path}`,
      `database --to: ${target.path}`,
    ]);
    assert.equal(existsSync(target.path), true, 'the copy made its target');
  });

  test('when serve starts and stops, then it names the database it opened in one JSON log line, and all its output is JSON lines', async (t) => {
    const db = tempDatabase();
    t.after(() => db.remove());
    const server = await startServe({ DATABASE_URL: db.url, PETSTORE_API_KEYS: 'env-key-0123456789abcdef' });
    t.after(() => server.kill());
    // Stopped, so that every line it writes (the shutdown's too) is in the output judged.
    const { code, stdout, stderr } = await server.stop();
    assert.equal(code, 0, server.output());
    // A log pipeline reads both streams as JSON lines: one plain-text line would break it.
    assert.deepEqual(jsonLines(stderr), []);
    assert.deepEqual(databaseEntries(stdout), [
      { level: 30, pid: server.child.pid, msg: `database: ${db.path}` },
    ]);
  });

  test('when serve --workers 2 starts and stops, then the primary names the database in one JSON log line, and all the output is JSON lines', async (t) => {
    const db = tempDatabase();
    t.after(() => db.remove());
    const server = await startServe(
      { DATABASE_URL: db.url, PETSTORE_API_KEYS: 'env-key-0123456789abcdef' },
      { workers: 2 },
    );
    t.after(() => server.kill());
    const { code, stdout, stderr } = await server.stop();
    assert.equal(code, 0, server.output());
    assert.deepEqual(jsonLines(stderr), []);
    const primary = databaseEntries(stdout).filter((entry) => entry.pid === server.child.pid);
    assert.deepEqual(primary, [{ level: 30, pid: server.child.pid, msg: `database: ${db.path}` }]);
  });

  test('when a command runs on PostgreSQL with a password in DATABASE_URL, then stderr names the URL without the password', {
    skip: POSTGRES_UNAVAILABLE,
  }, async (t) => {
    const database = await postgres.create();
    t.after(() => database.drop());
    await (await database.open()).close();
    const withPassword = new URL(database.url);
    withPassword.password = 'hunter2-secret';
    const result = await runInProcess(['keys', 'list'], { DATABASE_URL: withPassword.href });
    assert.equal(result.code, 0, result.stderr);
    const expected = new URL(database.url);
    expected.password = '';
    expected.searchParams.sort(); // serialised again (`+` for a space), as the URL parser writes it
    assert.deepEqual(databaseLines(result.stderr), [`database: ${expected.href}`]);
    assert.equal(result.stderr.includes('hunter2'), false);
  });
});
