import type { Storage } from '../domain/storage.js';

export interface ReplicaState {
  /** host:port/database of the replica (never its password). */
  name: string;
  /** Seconds its replay is behind the primary, as last measured; Infinity while not known. */
  lagSeconds: number;
  /** True while it is not used because it failed, did not answer, or is not a standby. */
  setAside: boolean;
}

export interface ReplicaChange {
  replica: string;
  /** True: set aside (it failed, did not answer, or is not a standby); false: in use again. */
  setAside: boolean;
  error?: unknown;
}

export interface ReadStats {
  /** The API's reads (GET, HEAD), by where they were served. */
  reads: { primary: number; replica: number };
  replicas: ReplicaState[];
}

/** What a storage that reads from replicas (PostgreSQL with DATABASE_REPLICA_URLS) tells about them. */
export interface ReplicaReads {
  /** Where the API's reads were served, and each replica's state. */
  stats(): ReadStats;
  /** Tells `listener` each time a replica is set aside or used again (for the log). */
  watch(listener: (change: ReplicaChange) => void): void;
}

const offered = new WeakMap<Storage, ReplicaReads>();

/** Called by an adapter that reads from replicas, once opened: `replicaReads(storage)` answers `reads`. */
export function offerReplicaReads(storage: Storage, reads: ReplicaReads): void {
  offered.set(storage, reads);
}

/**
 * The replicas `storage` reads from, when it reads from any (its metrics, its log lines); undefined
 * otherwise. Not part of the domain's port: which copy of the data answers is the adapter's business,
 * and only the app's metrics and log ask. No PostgreSQL module is loaded to ask.
 */
export function replicaReads(storage: Storage): ReplicaReads | undefined {
  return offered.get(storage);
}
