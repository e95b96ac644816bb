import { SqliteStorage } from './sqlite/sqlite-storage.js';
import type { Storage } from './storage.js';

/** Picks the adapter from DATABASE_URL: `sqlite:<path>`, `sqlite::memory:` or `postgres://…`. */
export async function openStorage(databaseUrl: string): Promise<Storage> {
  if (databaseUrl.startsWith('sqlite:')) {
    return new SqliteStorage(databaseUrl.slice('sqlite:'.length));
  }
  throw new Error(`DATABASE_URL: unsupported database "${databaseUrl.split(':')[0]}"`);
}
