import type pg from 'pg';
import type { EventListQuery, EventStore, EventType, NewEvent, StoredEvent } from '../../domain/events.js';
import { countRows } from './count.js';
import type { PostgresNotifications } from './notifications.js';
import { inTransaction, type ReadPool } from './transaction.js';

/** The channel on which a commit that added deliveries wakes every node's deliverer. */
export const WEBHOOKS_CHANNEL = 'petstore_webhooks';
/** The channel on which every commit that records events wakes every node's live event streams. */
export const EVENTS_CHANNEL = 'petstore_events';

/**
 * Any fixed number, the same in every node. A transaction that records events takes this lock just
 * before drawing their ids, and PostgreSQL releases it only once the transaction's commit is visible to
 * everyone: so ids are drawn in commit order, and a reader can never see an event while one with a
 * smaller id may still commit. (Drawn freely, a sequence's values commit out of order: a reader asking
 * for "after 41" could see 43, then never see 42 commit behind it.) What it costs: transactions that
 * record events commit one after another, each holding the lock for its last statement and its commit.
 */
export const EVENT_ORDER_LOCK = 7_304_118_263_520_002n;

interface EventRow {
  id: bigint;
  type: EventType;
  occurred_at: Date;
  data: string;
}

const toEvent = (row: EventRow): StoredEvent => ({
  id: row.id,
  type: row.type,
  occurredAt: row.occurred_at,
  data: row.data,
});

/**
 * Records events in the caller's transaction, last thing before its COMMIT. Their deliveries fan out
 * afterwards (delivery-queue.ts, fanOut), so a change costs the same however many endpoints there are; while
 * any endpoint is enabled, a NOTIFY (sent by PostgreSQL at commit, to every node) wakes the deliverers.
 * Another wakes the live streams of every node that listens: NOTIFY serialises the commits that send
 * one, and the order lock above already serialises these.
 */
export async function appendEvents(client: pg.PoolClient, events: readonly NewEvent[]): Promise<void> {
  if (events.length === 0) return;
  await client.query({
    ...EVENT_WRITES.append,
    values: [
      events.map((e) => e.type),
      events.map((e) => e.occurredAt),
      events.map((e) => e.data),
      events.map((e) => e.cause ?? null),
      EVENT_ORDER_LOCK,
    ],
  });
}

/**
 * appendEvents' statement (the benchmark's bare create runs it through other drivers too). It takes the
 * order lock itself: no row reaches the INSERT, and so no id is drawn, before `locked` has its one row.
 * As a statement of its own, the lock was held for one more round trip to a node (a wait on the node's
 * event loop, as long as the node is busy: under load, most of what a commit held it for).
 */
export const EVENT_WRITES = {
  append: {
    name: 'events_append',
    text: `WITH locked AS MATERIALIZED (
             SELECT pg_advisory_xact_lock($5)
           ), ev AS (
             INSERT INTO events (type, occurred_at, data, trace_context)
             SELECT type, occurred_at, data, trace_context
             FROM locked, unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[])
               WITH ORDINALITY AS e(type, occurred_at, data, trace_context, n)
             ORDER BY n
             RETURNING id
           )
           SELECT pg_notify('${EVENTS_CHANNEL}', current_schema()), CASE WHEN EXISTS (SELECT 1 FROM webhook_endpoints WHERE status = 'enabled')
             THEN pg_notify('${WEBHOOKS_CHANNEL}', current_schema()) END`,
  },
} as const;

export class PostgresEventStore implements EventStore {
  readonly #pool: pg.Pool;
  /**
   * Where the API's reads go: the pool, or the replicas' router (replicas.ts). The feed's rule holds on
   * a hot standby as on the primary: a standby makes a transaction visible when it replays its commit
   * record, in WAL order, and EVENT_ORDER_LOCK puts those records in id order (the lock is released
   * after the commit is written and visible). So every server, the primary or any replica however far
   * behind, shows a prefix of the events, and pages read from one and then another skip nothing.
   */
  readonly #reads: ReadPool;
  readonly #notifications: PostgresNotifications;

  constructor(pool: pg.Pool, notifications: PostgresNotifications, reads: ReadPool = pool) {
    this.#pool = pool;
    this.#reads = reads;
    this.#notifications = notifications;
  }

  async list({ afterId, types, limit }: EventListQuery): Promise<StoredEvent[]> {
    const { rows } = await this.#reads.query<EventRow>(
      types.length === 0
        ? {
            name: 'events_page',
            text: 'SELECT id, type, occurred_at, data FROM events WHERE id > $1 ORDER BY id LIMIT $2',
            values: [afterId, limit],
          }
        : {
            name: 'events_page_by_type',
            text: 'SELECT id, type, occurred_at, data FROM events WHERE id > $1 AND type = ANY ($2::text[]) ORDER BY id LIMIT $3',
            values: [afterId, types, limit],
          },
    );
    return rows.map(toEvent);
  }

  async findById(id: bigint): Promise<StoredEvent | undefined> {
    const { rows } = await this.#reads.query<EventRow>({
      name: 'event_by_id',
      text: 'SELECT id, type, occurred_at, data FROM events WHERE id = $1',
      values: [id],
    });
    return rows[0] && toEvent(rows[0]);
  }

  /** max(id) is enough: ids are drawn under EVENT_ORDER_LOCK, so a committed id has no smaller one still to commit. */
  async lastId(): Promise<bigint> {
    const { rows } = await this.#reads.query<{ id: bigint }>({
      name: 'events_last_id',
      text: 'SELECT coalesce(max(id), 0)::bigint AS id FROM events',
    });
    return BigInt(rows[0]?.id ?? 0);
  }

  /** Woken by the node's one LISTEN connection (notifications.ts), at every node's commits. */
  watch(listener: () => void): () => void {
    return this.#notifications.watch(EVENTS_CHANNEL, listener);
  }

  async deleteOlderThan(before: Date, batchSize: number): Promise<number> {
    return inTransaction(this.#pool, async (client) => {
      const { rows } = await client.query<{ id: bigint }>(
        'SELECT id FROM events WHERE occurred_at < $1 ORDER BY id LIMIT $2',
        [before, batchSize],
      );
      if (rows.length === 0) return 0;
      const ids = rows.map((row) => row.id);
      await client.query('DELETE FROM webhook_deliveries WHERE event_id = ANY ($1::bigint[])', [ids]);
      const { rowCount } = await client.query('DELETE FROM events WHERE id = ANY ($1::bigint[])', [ids]);
      return rowCount ?? 0;
    });
  }

  async count(): Promise<number> {
    return countRows(this.#pool, 'events');
  }

  async importBatch(events: readonly StoredEvent[]): Promise<number> {
    if (events.length === 0) return 0;
    return inTransaction(this.#pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [EVENT_ORDER_LOCK]);
      const { rowCount } = await client.query(
        `INSERT INTO events (id, type, occurred_at, data)
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::text[])
         ON CONFLICT (id) DO NOTHING`,
        [
          events.map((e) => e.id),
          events.map((e) => e.type),
          events.map((e) => e.occurredAt),
          events.map((e) => e.data),
        ],
      );
      await client.query(
        `SELECT setval(seq, greatest((SELECT max(id) FROM events), nextval(seq)))
         FROM CAST(pg_get_serial_sequence('events', 'id') AS regclass) AS seq`,
      );
      // Imported events were delivered (or not) where they came from: the fan-out starts after them.
      await client.query(
        'UPDATE webhook_fanout SET last_event_id = greatest(last_event_id, (SELECT max(id) FROM events))',
      );
      return rowCount ?? 0;
    });
  }
}
