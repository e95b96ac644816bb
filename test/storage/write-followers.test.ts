import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type pg from 'pg';
import { PostgresIdempotencyStore } from '../../src/storage/postgres/idempotency.js';
import { PostgresPetStore } from '../../src/storage/postgres/pets.js';
import { newPool } from '../../src/storage/postgres/postgres-storage.js';
import { currentReadScope, runInReadScope } from '../../src/storage/postgres/read-scope.js';
import { followWrites } from '../../src/storage/postgres/transaction.js';
import { postgres, type TestDatabase } from '../support/backends.js';

// Read-your-writes is recorded by the pool the stores write through (transaction.ts), for every write
// whatever its method: nothing names the writes. A position from `position` is told apart from a
// commit's by its value.
const ASKED = 7n;

let database: TestDatabase;
let pool: pg.Pool;
let wrote: [string, bigint][];
let followed: pg.Pool;

before(async () => {
  database = await postgres.create();
  await (await database.open()).close(); // the schema, migrated
  pool = newPool(database.url, { poolSize: 4, timeoutMs: 5_000 });
  followed = followWrites(pool, {
    writer: () => currentReadScope()?.key,
    wrote: async (key, lsn) => {
      wrote.push([key, lsn]);
    },
    position: async () => ASKED,
  });
});

after(async () => {
  await pool?.end();
  await database?.drop();
});

const scope = (key: string) => ({ key, replicaReads: false });

test("when two callers' creates commit together (one group commit), then each caller's position is recorded, in its own scope, once", async () => {
  wrote = [];
  const pets = new PostgresPetStore(followed, new PostgresIdempotencyStore(followed).pets);
  const create = (name: string) => ({ pet: { name, categoryId: 1n, status: 'available' as const } });
  await Promise.all([
    runInReadScope(scope('a'), () => pets.create(create('Rex'))),
    runInReadScope(scope('b'), () => pets.create(create('Tom'))),
  ]);
  // Outside any scope (background work): nothing to record.
  await pets.create(create('Kit'));
  assert.deepEqual(wrote.map(([key]) => key).sort(), ['a', 'b']);
  const [[, first], [, second]] = wrote as [[string, bigint], [string, bigint]];
  assert.ok(first > ASKED && first === second, 'the commit position of the batch they shared');
});

test('when a statement that writes runs on its own in a scope, then the position asked after it is recorded; a read records nothing', async () => {
  wrote = [];
  await runInReadScope(scope('c'), async () => {
    await followed.query("UPDATE pets SET name = name WHERE name = 'nobody'");
    await followed.query({
      text: 'WITH touched AS (DELETE FROM pets WHERE id = $1 RETURNING id) SELECT * FROM touched',
      values: [-1],
    });
    await followed.query('SELECT count(*) FROM pets');
  });
  assert.deepEqual(wrote, [
    ['c', ASKED],
    ['c', ASKED],
  ]);
});
