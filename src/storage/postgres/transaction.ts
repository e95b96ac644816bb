import type { Pool, PoolClient } from 'pg';

/**
 * Runs `work` on one pooled connection inside BEGIN … COMMIT, rolling back if it throws. A connection
 * whose ROLLBACK also failed is in an unknown state, so it is destroyed instead of returned to the pool.
 */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch((rollbackError: Error) => {
      broken = rollbackError;
    });
    throw error;
  } finally {
    client.release(broken);
  }
}
