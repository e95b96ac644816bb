import type { Pool, PoolClient } from 'pg';
import { isConnectionLost } from './errors.js';

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
    await client.query('COMMIT');
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
