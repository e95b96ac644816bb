/**
 * Where each operation keeps its Idempotency-Key records: a table per operation, so a key names one
 * request of one operation (per API key), and each record references what it created with a foreign
 * key. Both adapters build the same statements from these names (constants, never input).
 */
export interface IdempotencyTable {
  table: 'idempotency_keys' | 'order_idempotency_keys' | 'recover_idempotency_keys';
  /** The column holding what the first request created: its id, or (a recovery) how many it queued. */
  created: 'pet_id' | 'order_id' | 'queued';
}

export const IDEMPOTENCY_TABLES = {
  pets: { table: 'idempotency_keys', created: 'pet_id' },
  orders: { table: 'order_idempotency_keys', created: 'order_id' },
  recoveries: { table: 'recover_idempotency_keys', created: 'queued' },
} as const satisfies Record<string, IdempotencyTable>;

/** A live record found for a key: the request it was first used with, and what that request created. */
export interface RecordedClaim {
  requestHash: string;
  id: bigint;
}
