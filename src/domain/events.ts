import type { Order } from './order.js';
import type { Pet } from './pet.js';

/**
 * What happened, as an integrator learns it. Every change made through the API is recorded as an event
 * in the transaction that makes the change (the storage adapters do it), so neither exists without the
 * other. A request that changes nothing records nothing.
 */
export const EVENT_TYPES = [
  'pet.created',
  'order.placed',
  'order.delivered',
  'order.cancelled',
  // Not a change made through the API: a delivery process disabled an endpoint (webhooks.ts).
  'webhook_endpoint.disabled',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const isEventType = (value: string): value is EventType =>
  (EVENT_TYPES as readonly string[]).includes(value);

/** An event to record with a change: `data` is the resource right after it, as the API's JSON. */
export interface NewEvent {
  type: EventType;
  occurredAt: Date;
  data: string;
  /** What caused it (event-cause.ts): kept with the event for its deliveries, never part of the Event served. */
  cause?: string | undefined;
}

/** A recorded event: ids ascend in the order the changes committed. */
export interface StoredEvent extends NewEvent {
  id: bigint;
}

/** A pet as the JSON object the API sends: the Pet schema's properties in its order, int64 exact. */
export const petJson = (pet: Pet): string =>
  `{"id":${pet.id},"name":${JSON.stringify(pet.name)},"categoryId":${pet.categoryId},"status":"${pet.status}"}`;

/** An order as the JSON object the API sends. */
export const orderJson = (order: Order): string =>
  `{"id":${order.id},"petId":${order.petId},"status":"${order.status}","placedAt":"${order.placedAt.toISOString()}"}`;

export const petCreated = (pet: Pet, at: Date, cause?: string): NewEvent => ({
  type: 'pet.created',
  occurredAt: at,
  data: petJson(pet),
  cause,
});

/** order.placed, order.delivered or order.cancelled, after the order's own status. */
export const orderChanged = (order: Order, at: Date, cause?: string): NewEvent => ({
  type: `order.${order.status}`,
  occurredAt: at,
  data: orderJson(order),
  cause,
});

/**
 * The Event as the API sends it (getEvent, listEvents, and the body of every webhook delivery):
 * `{id, type, occurredAt, data}`, written out so `data` stays byte for byte what was recorded.
 */
export const eventJson = (event: StoredEvent): string =>
  `{"id":${event.id},"type":"${event.type}","occurredAt":"${event.occurredAt.toISOString()}","data":${event.data}}`;

export interface EventListQuery {
  /** Only events with a greater id. */
  afterId: bigint;
  /** Only events of these types; empty: every type. */
  types: readonly EventType[];
  limit: number;
}

/** The event log, read side; written only by the stores that make the changes. */
export interface EventStore {
  /**
   * Events in ascending id order. Never skips: an event is returned only once every event with a
   * smaller id is visible too or can no longer appear, so a reader that asks again after the last id
   * it saw misses nothing, whatever commits meanwhile on any node.
   */
  list(query: EventListQuery): Promise<StoredEvent[]>;
  findById(id: bigint): Promise<StoredEvent | undefined>;
  /**
   * The greatest id `list` could return now (0 when there is none): every event with a smaller id is
   * visible too or can no longer appear. Where a live reader starts following.
   */
  lastId(): Promise<bigint>;
  /**
   * `listener` is called, on a later turn, when events may have been recorded since: by this process,
   * or by any other on the same database. A node watches once and fans out to its readers (a watch
   * per reader would cost the database a wake-up per reader); returns the unwatch.
   */
  watch(listener: () => void): () => void;
  /** Deletes at most `batchSize` events that occurred before `before` (and their deliveries); resolves to how many. */
  deleteOlderThan(before: Date, batchSize: number): Promise<number>;
  count(): Promise<number>;
  /** Events copied from another database, ids kept; an id already present is left as it is. */
  importBatch(events: readonly StoredEvent[]): Promise<number>;
}
