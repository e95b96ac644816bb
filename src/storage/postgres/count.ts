import type pg from 'pg';

/** The number of rows in one of our tables (a known name, never user input). */
export async function countRows(
  pool: pg.Pool,
  table: 'pets' | 'orders' | 'api_keys' | 'events' | 'webhook_endpoints',
): Promise<number> {
  const { rows } = await pool.query<{ count: bigint }>(`SELECT count(*) AS count FROM ${table}`);
  return Number(rows[0]?.count ?? 0n);
}
