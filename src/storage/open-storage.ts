import { resolve } from 'node:path';
import type { Config } from '../config/config.js';
import type { Storage } from '../domain/storage.js';
import type { SharedRedis } from '../redis.js';

/**
 * Picks the adapter from DATABASE_URL: `sqlite:<path>`, `sqlite::memory:` or `postgres://…`. Each
 * adapter is loaded only when chosen: a process on SQLite never loads pg (about 10 MiB resident).
 */
export async function openStorage(
  {
    databaseUrl,
    databasePoolSize,
    databaseTimeoutMs,
    databaseReplicaUrls = [],
    databaseReplicaMaxLagMs,
  }: Pick<Config, 'databaseUrl' | 'databasePoolSize' | 'databaseTimeoutMs'> &
    Partial<Pick<Config, 'databaseReplicaUrls' | 'databaseReplicaMaxLagMs'>>,
  /** The key cache's clock; only PostgreSQL's cache remembers an active key, so only it needs one. */
  now: () => number = Date.now,
  /** The service's Redis (REDIS_URL, redis.ts): where replicas' write positions are shared. */
  redis?: SharedRedis,
): Promise<Storage> {
  if (databaseKind(databaseUrl) === 'sqlite') {
    const { SqliteStorage } = await import('./sqlite/sqlite-storage.js');
    return new SqliteStorage(databaseUrl.slice('sqlite:'.length), { timeoutMs: databaseTimeoutMs });
  }
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) {
    const { PostgresStorage } = await import('./postgres/postgres-storage.js');
    return PostgresStorage.open(databaseUrl, {
      poolSize: databasePoolSize,
      timeoutMs: databaseTimeoutMs,
      now,
      replicaUrls: databaseReplicaUrls,
      ...(databaseReplicaMaxLagMs === undefined ? {} : { replicaMaxLagMs: databaseReplicaMaxLagMs }),
      redis,
    });
  }
  throw new Error(
    `unsupported database "${databaseUrl.split(':')[0]}"; expected sqlite:<path>, sqlite::memory: or postgres://…`,
  );
}

/** Which backend DATABASE_URL names (openStorage refuses any other). */
export function databaseKind(databaseUrl: string): 'sqlite' | 'postgresql' {
  return databaseUrl.startsWith('sqlite:') ? 'sqlite' : 'postgresql';
}

/**
 * Where DATABASE_URL points, for people: a SQLite file as an absolute path (a relative one depends on
 * the working directory, so a start from another folder would silently open a new, empty database),
 * or a PostgreSQL URL without its password.
 */
export function databaseLocation(databaseUrl: string): string {
  if (databaseUrl === 'sqlite::memory:') return 'in memory (sqlite::memory:), gone when the process exits';
  if (databaseUrl.startsWith('sqlite:')) return resolve(databaseUrl.slice('sqlite:'.length));
  try {
    const url = new URL(databaseUrl);
    url.password = '';
    url.searchParams.delete('password');
    return url.href;
  } catch {
    return databaseUrl.split(':')[0] ?? '';
  }
}
