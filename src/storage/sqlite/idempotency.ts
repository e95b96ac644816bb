import type Database from 'better-sqlite3';
import type { IdempotencyClaim, IdempotencyStore } from '../../domain/storage.js';
import { IDEMPOTENCY_TABLES, type IdempotencyTable, type RecordedClaim } from '../idempotency-tables.js';

/**
 * One operation's Idempotency-Key records on SQLite (createPet's, placeOrder's); timestamps are epoch
 * milliseconds. `claim`, `attach` and `recorded` run inside the transaction that creates the resource
 * (pets.ts, orders.ts), never on their own.
 */
export class SqliteIdempotencyKeys {
  readonly #claim: Database.Statement<[ClaimRow], { claimed: number }>;
  readonly #attach: Database.Statement<[bigint, string, string]>;
  readonly #recorded: Database.Statement<[string, string], { request_hash: string; id: bigint }>;
  readonly #prune: Database.Statement<[number]>;

  constructor(db: Database.Database, { table, created }: IdempotencyTable) {
    // Inserts the record, or takes over an expired one; returns no row when a live record exists.
    this.#claim = db.prepare<[ClaimRow], { claimed: number }>(
      `INSERT INTO ${table} (api_key_hash, key, request_hash, ${created}, created_at)
       VALUES (@api_key_hash, @key, @request_hash, NULL, @created_at)
       ON CONFLICT (api_key_hash, key) DO UPDATE
         SET request_hash = excluded.request_hash, ${created} = NULL, created_at = excluded.created_at
         WHERE ${table}.created_at < @expired_before
       RETURNING 1 AS claimed`,
    );
    this.#attach = db.prepare<[bigint, string, string]>(
      `UPDATE ${table} SET ${created} = ? WHERE api_key_hash = ? AND key = ?`,
    );
    this.#recorded = db
      .prepare<[string, string], { request_hash: string; id: bigint }>(
        `SELECT request_hash, ${created} AS id FROM ${table} WHERE api_key_hash = ? AND key = ?`,
      )
      .safeIntegers(true);
    this.#prune = db.prepare<[number]>(`DELETE FROM ${table} WHERE created_at < ?`);
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

  /** Records what the claim created. */
  attach(claim: IdempotencyClaim, id: bigint): void {
    this.#attach.run(id, claim.apiKeyHash, claim.key);
  }

  /** What an earlier request with this key was, and the id of what it created. */
  recorded(claim: IdempotencyClaim): RecordedClaim {
    const row = this.#recorded.get(claim.apiKeyHash, claim.key);
    if (!row || row.id === null) throw new Error('idempotency record without what it created');
    return { requestHash: row.request_hash, id: row.id };
  }

  prune(expiredBefore: Date): number {
    return this.#prune.run(expiredBefore.getTime()).changes;
  }
}

/** Every operation's Idempotency-Key records, pruned together. */
export class SqliteIdempotencyStore implements IdempotencyStore {
  readonly pets: SqliteIdempotencyKeys;
  readonly orders: SqliteIdempotencyKeys;
  readonly recoveries: SqliteIdempotencyKeys;

  constructor(db: Database.Database) {
    this.pets = new SqliteIdempotencyKeys(db, IDEMPOTENCY_TABLES.pets);
    this.orders = new SqliteIdempotencyKeys(db, IDEMPOTENCY_TABLES.orders);
    this.recoveries = new SqliteIdempotencyKeys(db, IDEMPOTENCY_TABLES.recoveries);
  }

  async prune(expiredBefore: Date): Promise<number> {
    return (
      this.pets.prune(expiredBefore) + this.orders.prune(expiredBefore) + this.recoveries.prune(expiredBefore)
    );
  }
}

interface ClaimRow {
  api_key_hash: string;
  key: string;
  request_hash: string;
  created_at: number;
  expired_before: number;
}
