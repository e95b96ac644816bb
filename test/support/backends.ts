import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStorage } from '../../src/storage/open-storage.js';
import type { Storage } from '../../src/storage/storage.js';

/** A database for one test: its URL, and a way to throw it away afterwards. */
export interface TestDatabase {
  url: string;
  open(): Promise<Storage>;
  drop(): Promise<void>;
}

export interface Backend {
  name: string;
  /** A fresh, empty database that no other test sees. */
  create(): Promise<TestDatabase>;
}

export const sqlite: Backend = {
  name: 'sqlite',
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-test-'));
    const url = `sqlite:${join(dir, 'petstore.db')}`;
    return {
      url,
      open: () => openStorage(url),
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  },
};

/** Every backend the suites run against. */
export const backends: Backend[] = [sqlite];
