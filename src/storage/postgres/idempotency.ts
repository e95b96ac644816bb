import type pg from 'pg';
import type { IdempotencyClaim, IdempotencyStore } from '../../domain/storage.js';
import { IDEMPOTENCY_TABLES, type IdempotencyTable, type RecordedClaim } from '../idempotency-tables.js';

/**
 * One operation's Idempotency-Key records on PostgreSQL (createPet's, placeOrder's), shared by every
 * node. `claim`, `attach` and `recorded` run inside the transaction that creates the resource
 * (pets.ts, orders.ts), on its connection, never on their own.
 */
export class PostgresIdempotencyKeys {
  readonly #table: IdempotencyTable;

  constructor(table: IdempotencyTable) {
    this.#table = table;
  }

  /**
   * True when this request may create (the key is new or its record expired). The primary key settles
   * races between nodes: a second claim of the same key waits on the first transaction's uncommitted
   * row, then (once it commits) finds the conflict and claims nothing, unless the record has expired.
   * If the first rolls back, the second claims it.
   */
  async claim(client: pg.PoolClient, claim: IdempotencyClaim): Promise<boolean> {
    const { table, created } = this.#table;
    const { rowCount } = await client.query(
      `INSERT INTO ${table} (api_key_hash, key, request_hash, ${created}, created_at)
       VALUES ($1, $2, $3, NULL, $4)
       ON CONFLICT (api_key_hash, key) DO UPDATE
         SET request_hash = excluded.request_hash, ${created} = NULL, created_at = excluded.created_at
         WHERE ${table}.created_at < $5
       RETURNING 1`,
      [claim.apiKeyHash, claim.key, claim.requestHash, claim.at, claim.expiredBefore],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Records what the claim created. */
  async attach(client: pg.PoolClient, claim: IdempotencyClaim, id: bigint): Promise<void> {
    const { table, created } = this.#table;
    await client.query(`UPDATE ${table} SET ${created} = $1 WHERE api_key_hash = $2 AND key = $3`, [
      id,
      claim.apiKeyHash,
      claim.key,
    ]);
  }

  /**
   * What an earlier request with this key was, and the id of what it created. READ COMMITTED: sees
   * the winner's committed record.
   */
  async recorded(client: pg.PoolClient, claim: IdempotencyClaim): Promise<RecordedClaim> {
    const { table, created } = this.#table;
    const { rows } = await client.query<{ request_hash: string; id: bigint | null }>(
      `SELECT request_hash, ${created} AS id FROM ${table} WHERE api_key_hash = $1 AND key = $2`,
      [claim.apiKeyHash, claim.key],
    );
    const row = rows[0];
    if (!row || row.id === null) throw new Error('idempotency record without what it created');
    return { requestHash: row.request_hash, id: row.id };
  }

  async prune(pool: pg.Pool, expiredBefore: Date): Promise<number> {
    const { rowCount } = await pool.query(`DELETE FROM ${this.#table.table} WHERE created_at < $1`, [
      expiredBefore,
    ]);
    return rowCount ?? 0;
  }
}

/** Every operation's Idempotency-Key records, pruned together. */
export class PostgresIdempotencyStore implements IdempotencyStore {
  readonly pets = new PostgresIdempotencyKeys(IDEMPOTENCY_TABLES.pets);
  readonly orders = new PostgresIdempotencyKeys(IDEMPOTENCY_TABLES.orders);
  readonly recoveries = new PostgresIdempotencyKeys(IDEMPOTENCY_TABLES.recoveries);
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async prune(expiredBefore: Date): Promise<number> {
    return (
      (await this.pets.prune(this.#pool, expiredBefore)) +
      (await this.orders.prune(this.#pool, expiredBefore)) +
      (await this.recoveries.prune(this.#pool, expiredBefore))
    );
  }
}
