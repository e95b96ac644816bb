import type pg from 'pg';
import type { Pool, PoolClient } from 'pg';
import { isConnectionLost } from './errors.js';

/** Where a store's reads go: a pool, or the replicas' router (replicas.ts), which has its `query`. */
export type ReadPool = Pick<Pool, 'query'>;

/**
 * Who is told of the primary's position after each write on a pool (replicas.ts: read-your-writes), in
 * the writer's own context and before the write resolves (so before its client hears of it).
 */
export interface WriteFollower {
  /** On whose behalf the current context writes (a request's key); undefined: nobody's, not followed. */
  writer(): string | undefined;
  /** After `writer`'s write committed up to `lsn`; a failure is the follower's (the write committed). */
  wrote(writer: string, lsn: bigint): Promise<void>;
  /** The primary's position now, after a statement committed on its own; never rejects. */
  position(): Promise<bigint>;
}

interface Followed {
  follower: WriteFollower;
  /** The largest position any of the pool's transactions reported at its commit. */
  lastCommit: bigint;
}

const followed = new WeakMap<Pool, Followed>();

/**
 * The pool, with every write on it reported to `follower`, whichever store or method makes it; the
 * stores are given this pool, so a write added later is followed without anyone naming it:
 * - every inTransaction on it commits with `COMMIT; SELECT pg_current_wal_lsn()`, one round trip in the
 *   simple query protocol, and reports the primary's position after its commit (with
 *   synchronous_commit on, at least the end of the commit record);
 * - a statement run on its own (`query`) that may write reports the position asked after it
 *   (follower.position): one more round trip, for a write only;
 * - a group commit (create-batcher.ts) reports, in each caller's context, the last commit's position,
 *   at least its own (afterGroupCommit).
 */
export function followWrites(pool: Pool, follower: WriteFollower): Pool {
  const state: Followed = { follower, lastCommit: 0n };
  const query = (...args: unknown[]) => {
    const result = (pool.query as (...args: unknown[]) => unknown)(...args);
    if (!(result instanceof Promise)) return result;
    const writer = follower.writer();
    if (writer === undefined || !mayWrite(args[0])) return result;
    return result.then(async (settled: unknown) => {
      await follower.wrote(writer, await follower.position());
      return settled;
    });
  };
  const bound = new Map<PropertyKey, unknown>([['query', query]]);
  const followedPool = new Proxy(pool, {
    get(target, key) {
      const cached = bound.get(key);
      if (cached !== undefined) return cached;
      const value = Reflect.get(target, key, target) as unknown;
      if (typeof value !== 'function') return value;
      const method = (value as (...args: unknown[]) => unknown).bind(target);
      bound.set(key, method);
      return method;
    },
  });
  followed.set(followedPool, state);
  return followedPool;
}

/**
 * Whether a statement may change data: anything but a plain SELECT or SHOW, and a SELECT whose text
 * names a data-changing command (a WITH … UPDATE … SELECT). A doubt counts as a write: recording a
 * position once too often only sends a key's reads to the primary for a moment.
 */
function mayWrite(statement: unknown): boolean {
  const text =
    typeof statement === 'string' ? statement : (statement as { text?: unknown } | undefined)?.text;
  if (typeof text !== 'string') return true;
  return !/^\s*(SELECT|SHOW)\b/i.test(text) || /\b(INSERT|UPDATE|DELETE|MERGE)\b/i.test(text);
}

/**
 * For a group commit on `pool` (CreateBatcher's afterCommit): reports, in the caller's context, the last
 * commit's position, which is at least that of the batch that carried the caller's write. Undefined
 * when nobody follows the pool's writes.
 */
export function afterGroupCommit(pool: Pool): (() => Promise<void>) | undefined {
  const state = followed.get(pool);
  if (!state) return undefined;
  return async () => {
    const writer = state.follower.writer();
    if (writer !== undefined) await state.follower.wrote(writer, state.lastCommit);
  };
}

/** A WAL position as PostgreSQL writes it ("16/B374D848") as the byte offset it names. */
export function parseLsn(text: string): bigint {
  const [high = '0', low = '0'] = text.split('/');
  return (BigInt(`0x${high}`) << 32n) | BigInt(`0x${low}`);
}

const COMMIT_AND_POSITION = 'COMMIT; SELECT pg_current_wal_lsn()::text AS lsn';

/**
 * Runs `work` on one pooled connection inside BEGIN … COMMIT, rolling back if it throws. A connection
 * whose ROLLBACK also failed is in an unknown state, so it is destroyed instead of returned to the pool.
 * `begin` may add statements to BEGIN (settings of the transaction): one round trip for all of them.
 */
export async function inTransaction<T>(
  pool: Pool,
  work: (client: PoolClient) => Promise<T>,
  begin = 'BEGIN',
): Promise<T> {
  const state = followed.get(pool);
  // Read now, in the caller's context.
  const writer = state?.follower.writer();
  const client = await pool.connect();
  let committed: bigint | undefined;
  let result: T;
  let broken: Error | undefined;
  // A connection that breaks (reset, server gone) rejects the statement under way and also emits
  // 'error' on the client; the pool listens only to idle clients, and an 'error' nobody listens to
  // would end the process. The statement's rejection is what this function acts on.
  const onError = (error: Error) => {
    broken = error;
  };
  client.on('error', onError);
  try {
    await client.query(begin);
    result = await work(client);
    if (state) {
      const results = (await client.query(COMMIT_AND_POSITION)) as unknown as pg.QueryResult[];
      const text = (results[1]?.rows[0] as { lsn?: string } | undefined)?.lsn;
      if (text) {
        const lsn = parseLsn(text);
        if (lsn > state.lastCommit) state.lastCommit = lsn;
        committed = lsn;
      }
    } else {
      await client.query('COMMIT');
    }
  } catch (error) {
    if (isConnectionLost(error)) {
      // A ROLLBACK would queue behind the lost statement and time out in its turn: PostgreSQL rolls
      // the transaction back itself once the connection closes.
      broken = error as Error;
    } else {
      await client.query('ROLLBACK').catch((rollbackError: Error) => {
        broken = rollbackError;
      });
    }
    throw error;
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
  // Committed, the connection back in the pool: the caller's position is recorded before it hears.
  if (state && writer !== undefined && committed !== undefined) await state.follower.wrote(writer, committed);
  return result;
}
