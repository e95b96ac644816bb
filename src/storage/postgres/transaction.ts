import type pg from 'pg';
import type { Pool, PoolClient } from 'pg';
import { isConnectionLost } from './errors.js';

/** Where a store's reads go: a pool, or the replicas' router (replicas.ts), which has its `query`. */
export type ReadPool = Pick<Pool, 'query'>;

/** What a pool's commits report, when someone follows them (replicas.ts: read-your-writes). */
const commitListeners = new WeakMap<Pool, (lsn: bigint) => void>();

/**
 * From now on every inTransaction on `pool` commits with `COMMIT; SELECT pg_current_wal_lsn()`, one
 * round trip in the simple query protocol, and tells `listener` the primary's WAL position after its
 * commit (with synchronous_commit on, at least the end of the commit record).
 */
export function followCommits(pool: Pool, listener: (lsn: bigint) => void): void {
  commitListeners.set(pool, listener);
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
  const client = await pool.connect();
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
    const result = await work(client);
    const onCommit = commitListeners.get(pool);
    if (onCommit) {
      const results = (await client.query(COMMIT_AND_POSITION)) as unknown as pg.QueryResult[];
      const lsn = (results[1]?.rows[0] as { lsn?: string } | undefined)?.lsn;
      if (lsn) onCommit(parseLsn(lsn));
    } else {
      await client.query('COMMIT');
    }
    return result;
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
}
