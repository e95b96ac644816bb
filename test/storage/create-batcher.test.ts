import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CreateBatcher } from '../../src/storage/create-batcher.js';
import { BetterSqlite3 } from '../../src/storage/sqlite/driver.js';

/**
 * A commit function writing each batch in one transaction of a real SQLite database (in memory), whose
 * CHECK constraint refuses a name starting with "bad": a batch holding one fails as a whole, rolled back
 * by the database. It records each batch it was given, and can be held open before committing.
 */
function recordingCommit() {
  const db = new BetterSqlite3(':memory:');
  db.exec("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL CHECK (name NOT LIKE 'bad%'))");
  const insert = db.prepare<[string], { id: number }>('INSERT INTO items (name) VALUES (?) RETURNING id');
  const insertAll = db.transaction((items: readonly string[]) =>
    items.map((item) => `stored ${item} as ${(insert.get(item) as { id: number }).id}`),
  );
  const batches: string[][] = [];
  let release: (() => void) | undefined;
  let holdNext = false;
  const commit = async (items: readonly string[]) => {
    batches.push([...items]);
    if (holdNext) {
      holdNext = false;
      await new Promise<void>((resolve) => {
        release = resolve;
      });
    }
    return insertAll(items);
  };
  return {
    batches,
    commit,
    stored: () =>
      db
        .prepare<[], { name: string }>('SELECT name FROM items ORDER BY id')
        .all()
        .map((row) => row.name),
    hold: () => {
      holdNext = true;
    },
    release: () => release?.(),
  };
}

describe('create batcher (group commit)', () => {
  test('when creates arrive in one event-loop turn, then they share one commit and each caller gets its own result', async () => {
    const recorder = recordingCommit();
    const batcher = new CreateBatcher(recorder.commit);
    const results = await Promise.all(['a', 'b', 'c', 'd'].map((item) => batcher.add(item)));
    assert.deepEqual(results, ['stored a as 1', 'stored b as 2', 'stored c as 3', 'stored d as 4']);
    assert.deepEqual(recorder.batches, [['a', 'b', 'c', 'd']]);
  });

  test('when creates arrive while a commit is in flight, then they wait for it and go together in the next one', async () => {
    const recorder = recordingCommit();
    const batcher = new CreateBatcher(recorder.commit);
    recorder.hold();
    const first = batcher.add('first');
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(recorder.batches, [['first']], 'the first commit has started');

    let laterSettled = false;
    const later = Promise.all([batcher.add('x'), batcher.add('y')]).finally(() => {
      laterSettled = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(laterSettled, false, 'no answer before its own batch commits');
    assert.equal(recorder.batches.length, 1, 'a single writer: no second commit while one is in flight');

    recorder.release();
    assert.equal(await first, 'stored first as 1');
    assert.deepEqual(await later, ['stored x as 2', 'stored y as 3']);
    assert.deepEqual(recorder.batches, [['first'], ['x', 'y']]);
  });

  test('when a batch fails, then exactly its callers are rejected and the next batch still commits', async () => {
    const recorder = recordingCommit();
    const batcher = new CreateBatcher(recorder.commit);
    recorder.hold();
    const ok = batcher.add('ok');
    await new Promise((resolve) => setImmediate(resolve));
    const failing = [batcher.add('bad 1'), batcher.add('bad 2')];
    recorder.release();
    assert.equal(await ok, 'stored ok as 1');
    for (const result of await Promise.allSettled(failing)) {
      assert.equal(result.status, 'rejected');
      assert.equal(
        (result as PromiseRejectedResult).reason.message,
        "CHECK constraint failed: name NOT LIKE 'bad%'",
      );
    }
    assert.equal(await batcher.add('after'), 'stored after as 2');
    assert.deepEqual(recorder.stored(), ['ok', 'after'], 'nothing of the failed batch is stored');
    assert.deepEqual(recorder.batches, [['ok'], ['bad 1', 'bad 2'], ['after']]);
  });

  test('when more creates are queued than a batch holds, then they are split into batches in arrival order', async () => {
    const recorder = recordingCommit();
    const batcher = new CreateBatcher(recorder.commit, { maxBatchSize: 3 });
    const items = ['1', '2', '3', '4', '5', '6', '7'];
    assert.deepEqual(
      await Promise.all(items.map((item) => batcher.add(item))),
      items.map((item, i) => `stored ${item} as ${i + 1}`),
    );
    assert.deepEqual(recorder.batches, [['1', '2', '3'], ['4', '5', '6'], ['7']]);
  });

  test('when creates are pending, then settled resolves only after they are committed', async () => {
    const recorder = recordingCommit();
    const batcher = new CreateBatcher(recorder.commit);
    await batcher.settled();
    const pending = batcher.add('late');
    let committed = false;
    void pending.then(() => {
      committed = true;
    });
    await batcher.settled();
    await Promise.resolve();
    assert.equal(committed, true);
    assert.deepEqual(recorder.batches, [['late']]);
  });
});
