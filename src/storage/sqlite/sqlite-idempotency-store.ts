import type Database from 'better-sqlite3';
import type { PetStatus } from '../../domain/pet.js';
import type {
  IdempotencyClaim,
  IdempotencyStore,
  IdempotentCreation,
  PetRecordInput,
} from '../../domain/storage.js';
import { type PetRow, toPet } from '../pet-row.js';

interface ClaimRow {
  api_key_hash: string;
  key: string;
  request_hash: string;
  created_at: number;
  expired_before: number;
}

/** Idempotency-Key records on SQLite. Timestamps are epoch milliseconds. */
export class SqliteIdempotencyStore implements IdempotencyStore {
  readonly #db: Database.Database;
  readonly #claim: Database.Statement<[ClaimRow], { claimed: number }>;
  readonly #insertPet: Database.Statement<[string, bigint, PetStatus], { id: bigint }>;
  readonly #attach: Database.Statement<[bigint, string, string]>;
  readonly #recorded: Database.Statement<[string, string], PetRow & { request_hash: string }>;

  constructor(db: Database.Database) {
    this.#db = db;
    // Inserts the record, or takes over an expired one; returns no row when a live record exists.
    this.#claim = db.prepare<[ClaimRow], { claimed: number }>(
      `INSERT INTO idempotency_keys (api_key_hash, key, request_hash, pet_id, created_at)
       VALUES (@api_key_hash, @key, @request_hash, NULL, @created_at)
       ON CONFLICT (api_key_hash, key) DO UPDATE
         SET request_hash = excluded.request_hash, pet_id = NULL, created_at = excluded.created_at
         WHERE idempotency_keys.created_at < @expired_before
       RETURNING 1 AS claimed`,
    );
    this.#insertPet = db
      .prepare<[string, bigint, PetStatus], { id: bigint }>(
        'INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING id',
      )
      .safeIntegers(true);
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
  }

  async createPetOnce(claim: IdempotencyClaim, pet: PetRecordInput): Promise<IdempotentCreation> {
    // IMMEDIATE: the write lock is taken first, so processes sharing the file (--workers) take turns
    // over the whole check-then-create, and exactly one of them creates.
    return this.#db
      .transaction((): IdempotentCreation => {
        const claimed = this.#claim.get({
          api_key_hash: claim.apiKeyHash,
          key: claim.key,
          request_hash: claim.requestHash,
          created_at: claim.at.getTime(),
          expired_before: claim.expiredBefore.getTime(),
        });
        if (claimed) {
          const { id } = this.#insertPet.get(pet.name, pet.categoryId, pet.status) as { id: bigint };
          this.#attach.run(id, claim.apiKeyHash, claim.key);
          return { pet: { id, ...pet }, requestHash: claim.requestHash, replayed: false };
        }
        const row = this.#recorded.get(claim.apiKeyHash, claim.key);
        if (!row) throw new Error('idempotency record without its pet');
        return { pet: toPet(row), requestHash: row.request_hash, replayed: true };
      })
      .immediate();
  }

  async prune(expiredBefore: Date): Promise<number> {
    return this.#db.prepare('DELETE FROM idempotency_keys WHERE created_at < ?').run(expiredBefore.getTime())
      .changes;
  }
}
