import type { ApiKeyScope } from './api-keys.js';
import type { Awaitable } from './awaitable.js';
import type { EventStore } from './events.js';
import type { Order, OrderSettlement, OrderStatus } from './order.js';
import type { Pet, PetStatus } from './pet.js';
import type { DeliveryQueue, WebhookEndpointStore } from './webhooks.js';

/**
 * The storage port: everything the domain needs from a database, owned by the domain. Each adapter
 * (src/storage/<database>/) implements it and passes the same contract suite,
 * test/storage/storage-contract.ts.
 */
export interface Storage {
  readonly pets: PetStore;
  readonly orders: OrderStore;
  readonly apiKeys: ApiKeyStore;
  readonly idempotency: IdempotencyStore;
  /** The event log (read side): every change through the API records its event in its own transaction. */
  readonly events: EventStore;
  readonly webhookEndpoints: WebhookEndpointStore;
  /** Webhook deliveries: fanned out from the event log, claimed, attempted and recorded by the deliverer. */
  readonly deliveries: DeliveryQueue;
  /** What opening the database did to its schema: the migrations it applied, if any. */
  readonly schema: SchemaVersions;
  /** A random secret shared by every node on this database, created on first use. */
  sharedSecret(name: string): Promise<Buffer>;
  /** Connection pool occupancy, for adapters that pool connections (metrics). */
  poolStats?(): PoolStats;
  /** Resolves when the database answers a query; for readiness probes. */
  ping(): Promise<void>;
  /**
   * After a bulk load (seed, migrate-data): refreshes the query planner's statistics where the planner
   * needs them (PostgreSQL), so the first queries are planned for the data that is there rather than
   * for an empty table.
   */
  analyze(): Promise<void>;
  close(): Promise<void>;
}

/** Schema versions before and after opening a database; `from` 0 means the schema was created. */
export interface SchemaVersions {
  from: number;
  to: number;
}

export interface PoolStats {
  total: number;
  idle: number;
  /** Clients queued for a connection. */
  waiting: number;
}

export interface PetRecordInput {
  name: string;
  categoryId: bigint;
  status: PetStatus;
}

export interface PetListQuery {
  /** Keyset position: only pets with a greater id. */
  afterId: bigint;
  status?: PetStatus | undefined;
  /** Only pets with one of these ids (at most MAX_SELECTED_IDS of them). */
  ids?: readonly bigint[] | undefined;
  limit: number;
}

/**
 * A page of pets as the bytes the API sends, written by the database: a JSON array of the Pet objects,
 * properties in the schema's order, int64 values as exact digits, strings escaped as JSON.stringify
 * escapes them. Byte for byte what the response schema's serialiser makes of the same rows
 * (test/storage/storage-contract.ts compares them), without turning each row into JavaScript values.
 */
export interface PetPageJson {
  /** JSON array of at most `limit` pets, in ascending id order. */
  json: string;
  /** While more pets follow the page: the id of its last pet (the next page's keyset position). */
  lastIdIfMore: bigint | undefined;
}

/** A pet to create, with the Idempotency-Key claim it was sent with, if any. */
export interface PetCreation {
  pet: PetRecordInput;
  /** When the pet is created: its pet.created event's occurredAt (by default, when it is stored). */
  at?: Date | undefined;
  idempotency?: IdempotencyClaim | undefined;
  /** What caused it (event-cause.ts), recorded with its pet.created event. */
  cause?: string | undefined;
}

export interface CreatedPet {
  pet: Pet;
  /** True when an earlier request with the same Idempotency-Key created the pet, false when this one did. */
  replayed: boolean;
  /** With a claim: the request hash the key was first used with (the claim's own when not replayed). */
  requestHash?: string | undefined;
}

export interface PetStore {
  /**
   * Creates the pet, or with an Idempotency-Key claim, creates it and records the key with it in one
   * transaction unless a live record for (apiKeyHash, key) exists: then nothing is created and the
   * recorded pet is returned. Concurrent claims of one key, from any node, are settled by the database:
   * exactly one creates. Resolves once durably stored; adapters group concurrent creates into one commit.
   * A pet created records its pet.created event in the same transaction; a replay records nothing.
   */
  create(creation: PetCreation): Promise<CreatedPet>;
  /**
   * Stores several new pets in one transaction (one durable commit), recording no events (seeding);
   * resolves to them, in order, with their ids.
   */
  createMany(pets: readonly PetRecordInput[]): Promise<Pet[]>;
  findById(id: bigint): Promise<Pet | undefined>;
  /**
   * The pet as the JSON object the API sends (see PetPageJson), or undefined. Like listJson, a read on
   * the request path: an adapter that answers synchronously returns the value itself (Awaitable).
   */
  findJsonById(id: bigint): Awaitable<string | undefined>;
  /** Pets in ascending id order. Without a status, also how migrate-data reads every pet, batch by batch. */
  list(query: PetListQuery): Promise<Pet[]>;
  /** The page `list` would return, as the JSON the API sends, and whether more pets follow it. */
  listJson(query: PetListQuery): Awaitable<PetPageJson>;
  count(): Promise<number>;
  /**
   * Stores pets copied from another database, ids kept, in one transaction. A pet whose id is already
   * taken is left as it is (pets never change, so a re-run has nothing to update). Pets created later
   * get ids above every imported one. Resolves to the number of pets inserted.
   */
  importBatch(pets: readonly Pet[]): Promise<number>;
  /** Resolves once every create accepted so far has been committed or refused (before closing). */
  settled(): Promise<void>;
}

/** An order to store as it is, with the animal status it implies: for seeding (OrderStore.createMany). */
export interface OrderRecordInput {
  petId: bigint;
  status: OrderStatus;
  placedAt: Date;
}

export interface OrderListQuery {
  /** Keyset position: only orders with a greater id. */
  afterId: bigint;
  status?: OrderStatus | undefined;
  petId?: bigint | undefined;
  /** Only orders with one of these ids (at most MAX_SELECTED_IDS of them). */
  ids?: readonly bigint[] | undefined;
  limit: number;
}

/** An order to place for an animal at `at`, with the Idempotency-Key claim it was sent with, if any. */
export interface OrderPlacement {
  petId: bigint;
  at: Date;
  idempotency?: IdempotencyClaim | undefined;
  /** What caused it (event-cause.ts), recorded with its order.placed event. */
  cause?: string | undefined;
}

/** How placing an order ended. Only `placed` changed anything. */
export type PlacedOrder =
  | { outcome: 'placed'; order: Order }
  /** An earlier request with the same Idempotency-Key placed `order`; this one changed nothing. */
  | { outcome: 'replayed'; order: Order; requestHash: string }
  | { outcome: 'unknown_pet' }
  | { outcome: 'pet_not_available'; petStatus: PetStatus };

/** How delivering or cancelling an order ended. Only `settled` changed anything. */
export type SettledOrder =
  | { outcome: 'settled'; order: Order }
  /** The order was already in the status asked for: a retry, answered with it unchanged. */
  | { outcome: 'unchanged'; order: Order }
  /** The order is in the other final status: it can no longer move. */
  | { outcome: 'conflict'; order: Order }
  | { outcome: 'unknown_order' };

/**
 * Orders, and the animal status each holds. The invariants are the database's, not the caller's: at
 * most one `placed` order per animal, and an order never changes without its animal (nor the other way
 * round), whatever runs concurrently, on this node or another.
 */
export interface OrderStore {
  /**
   * In one transaction: the animal goes from available to pending and the order is stored `placed`.
   * Of concurrent placements for one animal, from any node, exactly one is `placed`. With an
   * Idempotency-Key claim the key is recorded in that transaction too, unless a live record exists:
   * then nothing changes and the recorded order is returned. A refusal records nothing. A placed order
   * records its order.placed event in the same transaction.
   */
  place(placement: OrderPlacement): Promise<PlacedOrder>;
  /**
   * In one transaction: a `placed` order becomes `to` and its animal goes from pending to sold
   * (delivered) or available (cancelled). Of concurrent settlements of one order, exactly one settles,
   * and records its order.delivered or order.cancelled event (occurred `at`, by default when it is
   * stored) in the same transaction.
   */
  /** `cause`: what caused it (event-cause.ts), recorded with its event. */
  settle(id: bigint, to: OrderSettlement, at?: Date, cause?: string): Promise<SettledOrder>;
  findById(id: bigint): Promise<Order | undefined>;
  /** Orders in ascending id order; without filters also how migrate-data reads them, batch by batch. */
  list(query: OrderListQuery): Promise<Order[]>;
  count(): Promise<number>;
  /**
   * Stores orders as given, in one transaction, each animal taking the status its order implies: for
   * seeding animals that have no order yet. Resolves to them, in order, with their ids.
   */
  createMany(orders: readonly OrderRecordInput[]): Promise<Order[]>;
  /**
   * Stores orders copied from another database, ids kept, in one transaction; animals are left as they
   * are (their statuses were copied with them). An order whose id is taken, or that would give an animal
   * a second `placed` order, is left out. Orders placed later get ids above every imported one. Resolves
   * to the number of orders inserted.
   */
  importBatch(orders: readonly Order[]): Promise<number>;
  /** Resolves once every write accepted so far has been committed or refused (before closing). */
  settled(): Promise<void>;
}

export interface ApiKeyRecord {
  id: string;
  name: string;
  /** SHA-256 of the secret, hex. The secret itself is never stored. */
  hash: string;
  /** The secret's last four characters, to tell keys apart in a listing. */
  hint: string;
  /** What the key may do; keys stored before scopes existed have all four. */
  scopes: ApiKeyScope[];
  createdAt: Date;
  /** From this instant on the key is refused like an unknown one; undefined: it does not expire. */
  expiresAt: Date | undefined;
  revokedAt: Date | undefined;
  /** When the key was last used, to the minute or so (ApiKeyLastUse); undefined: never. */
  lastUsedAt: Date | undefined;
}

/** A key, by hash, was used at `at`. */
export interface ApiKeyUse {
  hash: string;
  at: Date;
}

export interface ApiKeyStore {
  insert(key: ApiKeyRecord): Promise<void>;
  /** The key with this hash unless it is revoked; whether it has expired is the caller's to judge, by its clock. */
  findActiveByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  /**
   * Records when keys were last used, in one statement. A use earlier than the one recorded (another
   * node's, later) leaves it as it is. Keys that do not exist are passed over.
   */
  recordLastUse(uses: readonly ApiKeyUse[]): Promise<void>;
  list(): Promise<ApiKeyRecord[]>;
  /** Resolves to false when no active key has this id. */
  revoke(id: string, at: Date): Promise<boolean>;
  count(): Promise<number>;
  /**
   * Stores keys copied from another database, hashes, scopes and expiry kept, in one transaction. A key
   * whose id exists only takes on a revocation: a re-run carries a revocation over, and never brings a
   * revoked key back.
   * Resolves to the number of keys inserted or revoked.
   */
  importBatch(keys: readonly ApiKeyRecord[]): Promise<number>;
}

/** One use of an Idempotency-Key: by whom, which key, for which request, and when. */
export interface IdempotencyClaim {
  /** SHA-256 of the API key that sent it: keys are scoped to their sender, and the API key is never stored. */
  apiKeyHash: string;
  key: string;
  /** A digest of the request's meaning, to tell a retry from a different request under the same key. */
  requestHash: string;
  at: Date;
  /** A record created before this instant has expired: it is treated as absent and replaced. */
  expiredBefore: Date;
}

export interface IdempotencyStore {
  /** Deletes records created before `expiredBefore`; resolves to how many. */
  prune(expiredBefore: Date): Promise<number>;
}
