import { existsSync } from 'node:fs';
import type { Storage } from '../domain/storage.js';
import { databaseLocation, openStorage } from '../storage/open-storage.js';
import type { CliIo } from './io.js';

export interface WithStorageOptions {
  /**
   * Whether a SQLite file that does not exist may be created. Only `migrate` says yes: any other
   * command run from the wrong directory would otherwise fill a new, empty database that the service
   * never reads (a key created there is a key the service answers 401).
   */
  create?: boolean;
  /** Whether to print `database: <where>` on stderr once it is open; `migrate` says where in its own line. */
  announce?: boolean;
}

/** Runs a command against the configured database (`io.env`'s DATABASE_URL), closing it afterwards. */
export async function withStorage<T>(
  io: CliIo,
  work: (storage: Storage) => Promise<T>,
  { create = false, announce = true }: WithStorageOptions = {},
): Promise<T> {
  // Loaded here: help, the version and usage errors start without the configuration's validator.
  const { loadConfig } = await import('../config/config.js');
  const { databaseUrl, ...config } = loadConfig(io.env);
  if (!create) refuseMissingDatabase(databaseUrl, 'DATABASE_URL');
  // The command line reads and writes on the primary: no replicas to probe.
  const storage = await openStorage({ ...config, databaseUrl, databaseReplicaUrls: [] });
  try {
    if (announce) io.stderr.write(`database: ${databaseLocation(databaseUrl)}\n`);
    return await work(storage);
  } finally {
    await storage.close();
  }
}

/**
 * Throws, naming the absolute path and the variable (or option) to set, when `databaseUrl` is a SQLite
 * file that does not exist: opening it would create it.
 */
export function refuseMissingDatabase(databaseUrl: string, setting: string): void {
  if (!databaseUrl.startsWith('sqlite:') || databaseUrl === 'sqlite::memory:') return;
  const path = databaseLocation(databaseUrl);
  if (existsSync(path)) return;
  throw new Error(
    `no database at ${path}; set ${setting} to the service's database (e.g. ${setting}=sqlite:/srv/petstore/data/petstore.db), or run \`petstore migrate\` to create this one`,
  );
}
