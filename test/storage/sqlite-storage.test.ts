import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sqlite } from '../support/backends.js';
import { bulkLoadThenAnalyze } from './analyze.js';
import { orderStoreContract } from './order-store-contract.js';
import { storageContract } from './storage-contract.js';

storageContract(sqlite);
orderStoreContract(sqlite);

test('when analyze runs after a bulk load on SQLite, then it writes no planner statistics (with them, SQLite re-plans each new status bound)', async (t) => {
  assert.equal(await bulkLoadThenAnalyze(t, sqlite), 0);
});
