import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import type { Pet } from '../../src/domain/pet.js';
import { ServiceMetrics } from '../../src/http/observability/metrics.js';
import { StorageOutage } from '../../src/http/observability/storage-outage.js';
import { sqlite } from '../support/backends.js';
import { bulkLoadThenAnalyze } from './analyze.js';
import { orderStoreContract } from './order-store-contract.js';
import { storageContract } from './storage-contract.js';

storageContract(sqlite);
orderStoreContract(sqlite);

test('when analyze runs after a bulk load on SQLite, then it writes no planner statistics (with them, SQLite re-plans each new status bound)', async (t) => {
  assert.equal(await bulkLoadThenAnalyze(t, sqlite), 0);
});

test("when getPet's and listPets' reads run on SQLite, then they answer at once, not with a promise, through every wrapper the service puts around the store", async (t) => {
  const database = await sqlite.create();
  const storage = await database.open();
  t.after(async () => {
    await storage.close();
    await database.drop();
  });
  // As the app wraps it: storage errors counted, outages logged (app.ts).
  const wrapped = new ServiceMetrics(storage).instrument(
    storage,
    new StorageOutage(pino({ enabled: false })),
  );
  const [pet] = await storage.pets.createMany([{ name: 'Rex', categoryId: 1n, status: 'available' }]);
  const id = (pet as Pet).id;
  for (const pets of [storage.pets, wrapped.pets]) {
    const one = pets.findJsonById(id);
    assert.equal(one, `{"id":${id},"name":"Rex","categoryId":1,"status":"available"}`);
    assert.equal(pets.findJsonById(id + 1n), undefined);
    const page = pets.listJson({ afterId: 0n, limit: 20 });
    assert.deepEqual(page, { json: `[${one}]`, lastIdIfMore: undefined });
  }
});
