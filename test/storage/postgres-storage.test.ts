import assert from 'node:assert/strict';
import { test } from 'node:test';
import { POSTGRES_NOT_RUN_NOTICE, postgres } from '../support/backends.js';
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

if (postgres.unavailable) process.stderr.write(POSTGRES_NOT_RUN_NOTICE);
