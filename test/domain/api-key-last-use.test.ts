import assert from 'node:assert/strict';
import { ApiKeyLastUse } from '../../src/domain/api-key-last-use.js';
import { newApiKey } from '../../src/domain/api-keys.js';
import type { Storage } from '../../src/domain/storage.js';
import { afterEach, backends, beforeEach, type TestDatabase, test } from '../support/backends.js';
import { executeSql, queryDatabase } from '../support/db-inspect.js';

const at = (second: number) => new Date(Date.UTC(2026, 10, 26, 12, 0, second));

/**
 * Triggers on the real table: one logs every row the store's write changes (so what each flush wrote
 * is read from the database), the other, while present, makes the write fail in the database itself.
 */
const SQL = {
  sqlite: {
    log: `CREATE TABLE last_use_writes (n INTEGER PRIMARY KEY, hash TEXT, at TEXT);
      CREATE TRIGGER log_last_use AFTER UPDATE OF last_used_at ON api_keys
      BEGIN INSERT INTO last_use_writes (hash, at) VALUES (NEW.hash, NEW.last_used_at); END;`,
    refuse: `CREATE TRIGGER refuse_last_use BEFORE UPDATE OF last_used_at ON api_keys
      BEGIN SELECT RAISE(ABORT, 'the database refused the write'); END;`,
    allow: 'DROP TRIGGER refuse_last_use',
  },
  postgres: {
    log: `CREATE TABLE last_use_writes (n serial PRIMARY KEY, hash text, at timestamptz);
      CREATE FUNCTION log_last_use() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO last_use_writes (hash, at) VALUES (NEW.hash, NEW.last_used_at); RETURN NEW; END $$;
      CREATE TRIGGER log_last_use AFTER UPDATE OF last_used_at ON api_keys
      FOR EACH ROW EXECUTE FUNCTION log_last_use();`,
    refuse: `CREATE FUNCTION refuse_last_use() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'the database refused the write'; END $$;
      CREATE TRIGGER refuse_last_use BEFORE UPDATE OF last_used_at ON api_keys
      FOR EACH ROW EXECUTE FUNCTION refuse_last_use();`,
    allow: 'DROP TRIGGER refuse_last_use ON api_keys',
  },
} as const;

for (const backend of backends) {
  backend.describe(`last use of API keys, written to ${backend.name}`, () => {
    const sql = SQL[backend.name as keyof typeof SQL];
    let database: TestDatabase;
    let storage: Storage;
    /** The hash of each stored key, by a short name. */
    let hashes: Record<string, string>;

    beforeEach(async () => {
      database = await backend.create();
      storage = await database.open();
      hashes = {};
      for (const name of ['a', 'b', ...Array.from({ length: 20 }, (_, i) => `k${i}`), 'late']) {
        const key = newApiKey(`key ${name}`, at(0));
        await storage.apiKeys.insert(key.record);
        hashes[name] = key.record.hash;
      }
      await executeSql(database.url, sql.log);
    });
    afterEach(async () => {
      await storage.close();
      await database.drop();
    });

    /** Every row written since the triggers were made, in order, as [key name, ISO instant]. */
    const writes = async (): Promise<[string, string][]> => {
      const names = new Map(Object.entries(hashes).map(([name, hash]) => [hash, name]));
      const rows = await queryDatabase<{ hash: string; at: string | Date }>(
        database.url,
        'SELECT hash, at FROM last_use_writes ORDER BY n',
      );
      return rows.map((row) => [names.get(row.hash) ?? row.hash, new Date(row.at).toISOString()]);
    };
    const lastUsed = async (name: string) =>
      (await storage.apiKeys.list()).find((key) => key.hash === hashes[name])?.lastUsedAt?.toISOString();

    test('when keys are used many times between flushes, then each flush writes each key once, with its latest use', async () => {
      const lastUse = new ApiKeyLastUse(storage.apiKeys);
      for (let second = 0; second < 50; second++) {
        lastUse.used(hashes.a as string, at(second));
        if (second % 10 === 0) lastUse.used(hashes.b as string, at(second));
      }
      assert.deepEqual(await writes(), [], 'nothing is written on use');
      assert.equal(lastUse.pending, 2);
      await lastUse.flush();
      assert.equal(lastUse.pending, 0);
      assert.deepEqual((await writes()).sort(), [
        ['a', at(49).toISOString()],
        ['b', at(40).toISOString()],
      ]);
      assert.equal(await lastUsed('a'), at(49).toISOString());
      await lastUse.flush();
      assert.equal((await writes()).length, 2, 'nothing used since: nothing written');
    });

    test('when a write fails in the database, then its uses are written by the next flush, unless a later use replaced one', async () => {
      const lastUse = new ApiKeyLastUse(storage.apiKeys);
      lastUse.used(hashes.a as string, at(1));
      lastUse.used(hashes.b as string, at(2));
      await executeSql(database.url, sql.refuse);
      await assert.rejects(lastUse.flush(), /the database refused the write/);
      assert.equal(await lastUsed('a'), undefined, 'the failed write stored nothing');
      assert.equal(lastUse.pending, 2, 'both uses are kept for the next flush');
      await executeSql(database.url, sql.allow);

      lastUse.used(hashes.b as string, at(3));
      await lastUse.flush();
      assert.deepEqual((await writes()).sort(), [
        ['a', at(1).toISOString()],
        ['b', at(3).toISOString()],
      ]);
    });

    test('when flushes race (the timer and a shutdown), then each use is written exactly once', async () => {
      const lastUse = new ApiKeyLastUse(storage.apiKeys);
      for (let i = 0; i < 20; i++) lastUse.used(hashes[`k${i}`] as string, at(i));
      const flushes = [lastUse.flush(), lastUse.flush(), lastUse.flush()];
      lastUse.used(hashes.late as string, at(30));
      await Promise.all(flushes);
      const written = (await writes()).map(([name]) => name);
      assert.equal(written.length, 21);
      assert.deepEqual(new Set(written), new Set([...Array.from({ length: 20 }, (_, i) => `k${i}`), 'late']));
    });
  });
}
