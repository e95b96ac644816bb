import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { openStorage } from '../../src/storage/open-storage.js';

const root = mkdtempSync(join(tmpdir(), 'petstore-modes-'));
after(() => rmSync(root, { recursive: true, force: true }));

const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);

test('when a new SQLite database is created under umask 022, then its file, -wal and -shm are 0600 and the folders made for it 0700', async () => {
  const previous = process.umask(0o022);
  try {
    const path = join(root, 'new', 'nested', 'petstore.db');
    const storage = await openStorage(loadConfig({ DATABASE_URL: `sqlite:${path}` }));
    try {
      await storage.pets.createMany([{ name: 'Rex', categoryId: 1n, status: 'available' }]);
      for (const file of [path, `${path}-wal`, `${path}-shm`]) {
        assert.ok(existsSync(file), `${file} exists`);
        assert.equal(mode(file), '600', file);
      }
      assert.equal(mode(join(root, 'new')), '700');
      assert.equal(mode(join(root, 'new', 'nested')), '700');
    } finally {
      await storage.close();
    }
  } finally {
    process.umask(previous);
  }
});
