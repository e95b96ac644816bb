import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { POSTGRES_NOT_RUN_NOTICE, postgres } from '../support/backends.js';
import { until } from '../support/eventually.js';
import { createPet } from '../support/storage.js';
import { bulkLoadThenAnalyze } from './analyze.js';
import { orderStoreContract } from './order-store-contract.js';
import { storageContract } from './storage-contract.js';

storageContract(postgres);
orderStoreContract(postgres);

test('when analyze runs after a bulk load on PostgreSQL, then the planner counts every pet loaded', {
  skip: postgres.unavailable ?? false,
}, async (t) => {
  assert.equal(await bulkLoadThenAnalyze(t, postgres), 2000);
});

test('when two deployments share a PostgreSQL database in separate schemas, then a commit in one wakes the watchers of its own schema and none of the other', {
  skip: postgres.unavailable ?? false,
}, async () => {
  const [mine, theirs] = [await postgres.create(), await postgres.create()];
  const [writer, node, neighbour] = [await mine.open(), await mine.open(), await theirs.open()];
  try {
    const woken = { node: 0, neighbour: 0 };
    const unwatch = [node.events.watch(() => woken.node++), neighbour.events.watch(() => woken.neighbour++)];
    // A LISTEN session is up once a commit of its own schema reaches it; commits before it are missed.
    // Each commit gets a long while to arrive before another is made, so that none of these arrives
    // late and is taken below for a wake-up by the writer's commit.
    const commitUntilWoken = async (storage: typeof node, count: () => number, what: string) => {
      const pet = { name: what, categoryId: 1n, status: 'available' as const };
      await until(
        async () => {
          await createPet(storage, pet);
          for (let waited = 0; count() === 0 && waited < 2_000; waited += 20) await sleep(20);
          return count();
        },
        (n) => n > 0,
        what,
      );
    };
    await commitUntilWoken(node, () => woken.node, 'the node to listen');
    await commitUntilWoken(neighbour, () => woken.neighbour, 'the neighbour to listen');
    const before = { ...woken };
    await createPet(writer, { name: 'c', categoryId: 1n, status: 'available' as const });
    // One LISTEN session delivers notifications in commit order: once the neighbour's own later commit
    // has woken it, the writer's earlier one has reached it too, if it was going to.
    await createPet(neighbour, { name: 'd', categoryId: 1n, status: 'available' as const });
    await until(
      async () => woken,
      (w) => w.node > before.node && w.neighbour > before.neighbour,
      'both woken',
    );
    assert.equal(woken.neighbour, before.neighbour + 1, 'woken by its own commit alone');
    for (const stop of unwatch) stop();
  } finally {
    for (const storage of [writer, node, neighbour]) await storage.close();
    await mine.drop();
    await theirs.drop();
  }
});

if (postgres.unavailable) process.stderr.write(POSTGRES_NOT_RUN_NOTICE);
