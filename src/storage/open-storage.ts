import type { Config } from '../config/config.js';
import type { Storage } from './storage.js';

/**
 * Picks the adapter from DATABASE_URL: `sqlite:<path>`, `sqlite::memory:` or `postgres://…`. Each
 * adapter is loaded only when chosen: a process on SQLite never loads pg (about 10 MiB resident).
 */
export async function openStorage({
  databaseUrl,
  databasePoolSize,
  databaseTimeoutMs,
}: Pick<Config, 'databaseUrl' | 'databasePoolSize' | 'databaseTimeoutMs'>): Promise<Storage> {
  if (databaseUrl.startsWith('sqlite:')) {
    const { SqliteStorage } = await import('./sqlite/sqlite-storage.js');
    return new SqliteStorage(databaseUrl.slice('sqlite:'.length), { timeoutMs: databaseTimeoutMs });
  }
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) {
    const { PostgresStorage } = await import('./postgres/postgres-storage.js');
    return PostgresStorage.open(databaseUrl, { poolSize: databasePoolSize, timeoutMs: databaseTimeoutMs });
  }
  throw new Error(
    `unsupported database "${databaseUrl.split(':')[0]}"; expected sqlite:<path>, sqlite::memory: or postgres://…`,
  );
}
