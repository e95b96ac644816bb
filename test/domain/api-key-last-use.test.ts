import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiKeyLastUse } from '../../src/domain/api-key-last-use.js';
import type { ApiKeyUse } from '../../src/domain/storage.js';

const at = (second: number) => new Date(Date.UTC(2026, 10, 26, 12, 0, second));

/** A store that records every write, and fails the ones it is told to. */
function recordingStore() {
  const writes: ApiKeyUse[][] = [];
  let failNext = false;
  return {
    writes,
    failNext: () => {
      failNext = true;
    },
    store: {
      recordLastUse: async (uses: readonly ApiKeyUse[]) => {
        writes.push([...uses]);
        if (failNext) {
          failNext = false;
          throw new Error('the database is away');
        }
      },
    },
  };
}

describe('last use of API keys', () => {
  test('when keys are used many times between flushes, then each flush writes each key once, with its latest use', async () => {
    const { store, writes } = recordingStore();
    const lastUse = new ApiKeyLastUse(store);
    for (let second = 0; second < 50; second++) {
      lastUse.used('hash-a', at(second));
      if (second % 10 === 0) lastUse.used('hash-b', at(second));
    }
    assert.deepEqual(writes, [], 'nothing is written on use');
    assert.equal(lastUse.pending, 2);
    await lastUse.flush();
    assert.deepEqual(writes, [
      [
        { hash: 'hash-a', at: at(49) },
        { hash: 'hash-b', at: at(40) },
      ],
    ]);
    await lastUse.flush();
    assert.equal(writes.length, 1, 'nothing used since: nothing written');
  });

  test('when a write fails, then its uses are written by the next flush, unless a later use replaced one', async () => {
    const { store, writes, failNext } = recordingStore();
    const lastUse = new ApiKeyLastUse(store);
    lastUse.used('hash-a', at(1));
    lastUse.used('hash-b', at(2));
    failNext();
    await assert.rejects(lastUse.flush(), /the database is away/);
    lastUse.used('hash-b', at(3));
    await lastUse.flush();
    assert.deepEqual(writes.at(-1), [
      { hash: 'hash-a', at: at(1) },
      { hash: 'hash-b', at: at(3) },
    ]);
  });

  test('when flushes race (the timer and a shutdown), then each use is written exactly once', async () => {
    const { store, writes } = recordingStore();
    const lastUse = new ApiKeyLastUse(store);
    for (let i = 0; i < 20; i++) lastUse.used(`hash-${i}`, at(i));
    const flushes = [lastUse.flush(), lastUse.flush(), lastUse.flush()];
    lastUse.used('hash-late', at(30));
    await Promise.all(flushes);
    const written = writes.flat().map((use) => use.hash);
    assert.equal(written.length, 21);
    assert.equal(new Set(written).size, 21);
  });
});
