import type pg from 'pg';
import type { CreatedPet, IdempotencyClaim, IdempotencyStore } from '../../domain/storage.js';
import { type PetRow, toPet } from '../pet-row.js';

/**
 * Idempotency-Key records on PostgreSQL, shared by every node. `claim`, `attach` and `recorded` run
 * inside the pets store's create transaction (pets.ts), on its connection, never on their own.
 */
export class PostgresIdempotencyStore implements IdempotencyStore {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  /**
   * True when this request may create (the key is new or its record expired). The primary key settles
   * races between nodes: a second claim of the same key waits on the first transaction's uncommitted
   * row, then (once it commits) finds the conflict and claims nothing, unless the record has expired.
   * If the first rolls back, the second claims it.
   */
  async claim(client: pg.PoolClient, claim: IdempotencyClaim): Promise<boolean> {
    const { rowCount } = await client.query(
      `INSERT INTO idempotency_keys (api_key_hash, key, request_hash, pet_id, created_at)
       VALUES ($1, $2, $3, NULL, $4)
       ON CONFLICT (api_key_hash, key) DO UPDATE
         SET request_hash = excluded.request_hash, pet_id = NULL, created_at = excluded.created_at
         WHERE idempotency_keys.created_at < $5
       RETURNING 1`,
      [claim.apiKeyHash, claim.key, claim.requestHash, claim.at, claim.expiredBefore],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Records the pet the claim created. */
  async attach(client: pg.PoolClient, claim: IdempotencyClaim, petId: bigint): Promise<void> {
    await client.query('UPDATE idempotency_keys SET pet_id = $1 WHERE api_key_hash = $2 AND key = $3', [
      petId,
      claim.apiKeyHash,
      claim.key,
    ]);
  }

  /** What an earlier request with this key created. READ COMMITTED: sees the winner's committed record. */
  async recorded(client: pg.PoolClient, claim: IdempotencyClaim): Promise<CreatedPet> {
    const { rows } = await client.query<PetRow & { request_hash: string }>(
      `SELECT k.request_hash, p.id, p.name, p.category_id, p.status
       FROM idempotency_keys k JOIN pets p ON p.id = k.pet_id
       WHERE k.api_key_hash = $1 AND k.key = $2`,
      [claim.apiKeyHash, claim.key],
    );
    const row = rows[0];
    if (!row) throw new Error('idempotency record without its pet');
    return { pet: toPet(row), requestHash: row.request_hash, replayed: true };
  }

  async prune(expiredBefore: Date): Promise<number> {
    const { rowCount } = await this.#pool.query('DELETE FROM idempotency_keys WHERE created_at < $1', [
      expiredBefore,
    ]);
    return rowCount ?? 0;
  }
}
