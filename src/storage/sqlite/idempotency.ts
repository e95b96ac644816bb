import type Database from 'better-sqlite3';
import type { CreatedPet, IdempotencyClaim, IdempotencyStore } from '../../domain/storage.js';
import { type PetRow, toPet } from '../pet-row.js';

/**
 * Idempotency-Key records on SQLite; timestamps are epoch milliseconds. `claim`, `attach` and
 * `recorded` run inside the pets store's create transaction (pets.ts), never on their own.
 */
export class SqliteIdempotencyStore implements IdempotencyStore {
  readonly #claim: Database.Statement<[ClaimRow], { claimed: number }>;
  readonly #attach: Database.Statement<[bigint, string, string]>;
  readonly #recorded: Database.Statement<[string, string], PetRow & { request_hash: string }>;
  readonly #prune: Database.Statement<[number]>;

  constructor(db: Database.Database) {
    // Inserts the record, or takes over an expired one; returns no row when a live record exists.
    this.#claim = db.prepare<[ClaimRow], { claimed: number }>(
      `INSERT INTO idempotency_keys (api_key_hash, key, request_hash, pet_id, created_at)
       VALUES (@api_key_hash, @key, @request_hash, NULL, @created_at)
       ON CONFLICT (api_key_hash, key) DO UPDATE
         SET request_hash = excluded.request_hash, pet_id = NULL, created_at = excluded.created_at
         WHERE idempotency_keys.created_at < @expired_before
       RETURNING 1 AS claimed`,
    );
    this.#attach = db.prepare<[bigint, string, string]>(
      'UPDATE idempotency_keys SET pet_id = ? WHERE api_key_hash = ? AND key = ?',
    );
    this.#recorded = db
      .prepare<[string, string], PetRow & { request_hash: string }>(
        `SELECT k.request_hash, p.id, p.name, p.category_id, p.status
         FROM idempotency_keys k JOIN pets p ON p.id = k.pet_id
         WHERE k.api_key_hash = ? AND k.key = ?`,
      )
      .safeIntegers(true);
    this.#prune = db.prepare<[number]>('DELETE FROM idempotency_keys WHERE created_at < ?');
  }

  /** True when this request may create (the key is new or its record expired). */
  claim(claim: IdempotencyClaim): boolean {
    return (
      this.#claim.get({
        api_key_hash: claim.apiKeyHash,
        key: claim.key,
        request_hash: claim.requestHash,
        created_at: claim.at.getTime(),
        expired_before: claim.expiredBefore.getTime(),
      }) !== undefined
    );
  }

  /** Records the pet the claim created. */
  attach(claim: IdempotencyClaim, petId: bigint): void {
    this.#attach.run(petId, claim.apiKeyHash, claim.key);
  }

  /** What an earlier request with this key created. */
  recorded(claim: IdempotencyClaim): CreatedPet {
    const row = this.#recorded.get(claim.apiKeyHash, claim.key);
    if (!row) throw new Error('idempotency record without its pet');
    return { pet: toPet(row), requestHash: row.request_hash, replayed: true };
  }

  async prune(expiredBefore: Date): Promise<number> {
    return this.#prune.run(expiredBefore.getTime()).changes;
  }
}

interface ClaimRow {
  api_key_hash: string;
  key: string;
  request_hash: string;
  created_at: number;
  expired_before: number;
}
