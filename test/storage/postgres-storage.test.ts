import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backends, POSTGRES_NOT_RUN_NOTICE, postgres } from '../support/backends.js';
import { bulkLoadThenAnalyze } from './analyze.js';
import { storageContract } from './storage-contract.js';

if (backends.includes(postgres)) {
  storageContract(postgres);

  test('when analyze runs after a bulk load on PostgreSQL, then the planner counts every pet loaded', async (t) => {
    assert.equal(await bulkLoadThenAnalyze(t, postgres), 2000);
  });
} else process.stderr.write(POSTGRES_NOT_RUN_NOTICE);
