import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type { Backend } from '../support/backends.js';
import { plannedPetRows } from '../support/db-inspect.js';

/** Loads 2000 pets in one batch, runs analyze, and returns how many pets the planner's statistics count. */
export async function bulkLoadThenAnalyze(t: TestContext, backend: Backend): Promise<number> {
  const database = await backend.create();
  t.after(() => database.drop());
  const storage = await database.open();
  try {
    await storage.pets.createMany(
      Array.from({ length: 2000 }, (_, i) => ({
        name: `p${i}`,
        categoryId: 1n,
        status: 'available' as const,
      })),
    );
    assert.equal(await plannedPetRows(database.url), 0, 'no statistics before analyze');
    await storage.analyze();
    return await plannedPetRows(database.url);
  } finally {
    await storage.close();
  }
}
