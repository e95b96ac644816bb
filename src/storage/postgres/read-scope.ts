import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * On whose behalf the storage calls of the current request run, and whether its reads may be served
 * by a copy of the data that is slightly behind (a PostgreSQL streaming replica).
 *
 * Why an AsyncLocalStorage rather than a parameter: whether a read may go to a replica, and how fresh
 * that replica must be for this caller (read-your-writes), is a property of the request, not of any
 * use case: passing a "consistency token" through every read of every use case and store port would put
 * a storage concern into each signature, and writes that a store groups into one commit (pets, orders)
 * would still need it per item. The HTTP layer opens the scope once the caller is known (read-scope.ts
 * in src/http); the PostgreSQL adapter reads it when a read is asked for (its router, replicas.ts) and
 * when a write commits (to record the caller's position, transaction.ts). The use cases in between
 * neither see nor pass it, and the domain does not know of it: it lives here, beside the routing.
 * Outside any scope (background work, the command line) everything goes to the primary. This module
 * loads nothing of PostgreSQL's: the HTTP layer imports it whatever the database.
 */
export interface ReadScope {
  /** The caller's identity for read-your-writes: SHA-256 of its API key. */
  key: string;
  /** True for the API's reads (GET, HEAD): they may be served by a replica fresh enough for `key`. */
  replicaReads: boolean;
}

const scopes = new AsyncLocalStorage<ReadScope>();

/** Runs `work` (and everything it starts) within `scope`. */
export function runInReadScope<T>(scope: ReadScope, work: () => T): T {
  return scopes.run(scope, work);
}

/** The scope of the current request, or undefined outside any. */
export function currentReadScope(): ReadScope | undefined {
  return scopes.getStore();
}
