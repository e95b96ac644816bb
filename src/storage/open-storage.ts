import type { Config } from '../config/config.js';
import { PostgresStorage } from './postgres/postgres-storage.js';
import { SqliteStorage } from './sqlite/sqlite-storage.js';
import type { Storage } from './storage.js';

/** Picks the adapter from DATABASE_URL: `sqlite:<path>`, `sqlite::memory:` or `postgres://…`. */
export async function openStorage({
  databaseUrl,
  databasePoolSize,
}: Pick<Config, 'databaseUrl' | 'databasePoolSize'>): Promise<Storage> {
  if (databaseUrl.startsWith('sqlite:')) {
    return new SqliteStorage(databaseUrl.slice('sqlite:'.length));
  }
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) {
    return PostgresStorage.open(databaseUrl, { poolSize: databasePoolSize });
  }
  throw new Error(
    `unsupported database "${databaseUrl.split(':')[0]}"; expected sqlite:<path>, sqlite::memory: or postgres://…`,
  );
}
