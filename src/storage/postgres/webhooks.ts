import pg from 'pg';
import { type EventType, eventJson } from '../../domain/events.js';
import type {
  AttemptOutcome,
  AttemptRecorded,
  ClaimedDelivery,
  DeliveryListQuery,
  DisabledReason,
  EndpointTypes,
  NewWebhookEndpoint,
  PendingDeliveries,
  WebhookDelivery,
  WebhookDeliveryStatus,
  WebhookEndpoint,
  WebhookEndpointStatus,
  WebhookStore,
} from '../../domain/webhooks.js';
import { countRows } from './count.js';
import { WEBHOOKS_CHANNEL } from './events.js';
import { inTransaction } from './transaction.js';

/** Claimers on every node take turns under this lock: the per-endpoint bound counts every node's leases. */
const CLAIM_LOCK = 7_304_118_263_520_003n;
/** How soon a LISTEN connection that broke is opened again. */
const RELISTEN_MS = 1_000;

interface EndpointRow {
  id: bigint;
  url: string;
  types: string[];
  description: string;
  status: WebhookEndpointStatus;
  disabled_reason: DisabledReason | null;
  created_at: Date;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: Date | null;
}

interface DeliveryRow {
  endpoint_id: bigint;
  event_id: bigint;
  status: WebhookDeliveryStatus;
  attempts: number;
  last_attempt_at: Date | null;
  next_attempt_at: Date | null;
  last_response_status: number | null;
  last_error: string | null;
}

interface DueRow {
  endpoint_id: bigint;
  event_id: bigint;
  attempts: number;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: Date | null;
  type: EventType;
  occurred_at: Date;
  data: string;
}

const ENDPOINT_COLUMNS =
  'id, url, types, description, status, disabled_reason, created_at, secret, previous_secret, previous_secret_until';
const DELIVERY_COLUMNS =
  'endpoint_id, event_id, status, attempts, last_attempt_at, next_attempt_at, last_response_status, last_error';

const toEndpoint = (row: EndpointRow): WebhookEndpoint => ({
  id: row.id,
  url: row.url,
  types: row.types as unknown as EndpointTypes,
  description: row.description,
  status: row.status,
  disabledReason: row.disabled_reason ?? undefined,
  createdAt: row.created_at,
  secret: row.secret,
  previousSecret: row.previous_secret ?? undefined,
  previousSecretUntil: row.previous_secret_until ?? undefined,
});

const toDelivery = (row: DeliveryRow): WebhookDelivery => ({
  endpointId: row.endpoint_id,
  eventId: row.event_id,
  status: row.status,
  attempts: row.attempts,
  lastAttemptAt: row.last_attempt_at ?? undefined,
  nextAttemptAt: row.next_attempt_at ?? undefined,
  lastResponseStatus: row.last_response_status ?? undefined,
  lastError: row.last_error ?? undefined,
});

/**
 * Webhook endpoints and deliveries on PostgreSQL, for any number of nodes. Claims are made under an
 * advisory lock (one claimer at a time, on any node: no two lease one delivery, and the per-endpoint
 * bound is exact); a commit that adds deliveries NOTIFYs every node (events.ts), which LISTENs here.
 */
export class PostgresWebhookStore implements WebhookStore {
  readonly #pool: pg.Pool;
  readonly #url: string;
  readonly #listeners = new Set<() => void>();
  #listening: pg.Client | undefined;
  #closed = false;

  constructor(pool: pg.Pool, url: string) {
    this.#pool = pool;
    this.#url = url;
  }

  async #endpoint(db: pg.Pool | pg.PoolClient, id: bigint): Promise<WebhookEndpoint | undefined> {
    const { rows } = await db.query<EndpointRow>(
      `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1`,
      [id],
    );
    return rows[0] && toEndpoint(rows[0]);
  }

  async createEndpoint(e: NewWebhookEndpoint): Promise<WebhookEndpoint> {
    const { rows } = await this.#pool.query<EndpointRow>(
      `INSERT INTO webhook_endpoints (url, types, description, status, created_at, secret)
       VALUES ($1, $2, $3, 'enabled', $4, $5) RETURNING ${ENDPOINT_COLUMNS}`,
      [e.url, e.types, e.description, e.createdAt, e.secret],
    );
    return toEndpoint(rows[0] as EndpointRow);
  }

  async listEndpoints(afterId: bigint, limit: number): Promise<WebhookEndpoint[]> {
    const { rows } = await this.#pool.query<EndpointRow>(
      `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id > $1 ORDER BY id LIMIT $2`,
      [afterId, limit],
    );
    return rows.map(toEndpoint);
  }

  findEndpoint(id: bigint): Promise<WebhookEndpoint | undefined> {
    return this.#endpoint(this.#pool, id);
  }

  async deleteEndpoint(id: bigint): Promise<boolean> {
    const { rowCount } = await this.#pool.query('DELETE FROM webhook_endpoints WHERE id = $1', [id]);
    return (rowCount ?? 0) > 0;
  }

  async enableEndpoint(id: bigint): Promise<WebhookEndpoint | undefined> {
    const { rows } = await this.#pool.query<EndpointRow>(
      `UPDATE webhook_endpoints SET status = 'enabled', disabled_reason = NULL, failing_since = NULL
       WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`,
      [id],
    );
    return rows[0] && toEndpoint(rows[0]);
  }

  async rotateSecret(id: bigint, secret: string, previousUntil: Date): Promise<WebhookEndpoint | undefined> {
    const { rows } = await this.#pool.query<EndpointRow>(
      `UPDATE webhook_endpoints SET previous_secret = secret, secret = $1, previous_secret_until = $2
       WHERE id = $3 RETURNING ${ENDPOINT_COLUMNS}`,
      [secret, previousUntil, id],
    );
    return rows[0] && toEndpoint(rows[0]);
  }

  async listDeliveries({
    endpointId,
    beforeEventId,
    status,
    limit,
  }: DeliveryListQuery): Promise<WebhookDelivery[]> {
    const { rows } = await this.#pool.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries
       WHERE endpoint_id = $1 AND ($2::bigint IS NULL OR event_id < $2) AND ($3::text IS NULL OR status = $3)
       ORDER BY event_id DESC LIMIT $4`,
      [endpointId, beforeEventId ?? null, status ?? null, limit],
    );
    return rows.map(toDelivery);
  }

  async retryDelivery(endpointId: bigint, eventId: bigint, at: Date): Promise<WebhookDelivery | undefined> {
    const { rows } = await this.#pool.query<DeliveryRow>(
      `WITH retried AS (
         UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $3
         WHERE endpoint_id = $1 AND event_id = $2 RETURNING ${DELIVERY_COLUMNS}
       ) SELECT retried.*, pg_notify('${WEBHOOKS_CHANNEL}', '') FROM retried`,
      [endpointId, eventId, at],
    );
    return rows[0] && toDelivery(rows[0]);
  }

  async claimDue(
    now: Date,
    leaseUntil: Date,
    limit: number,
    perEndpoint: number,
  ): Promise<ClaimedDelivery[]> {
    return inTransaction(this.#pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [CLAIM_LOCK]);
      const leased = new Map<bigint, number>();
      const { rows: counts } = await client.query<{ endpoint_id: bigint; n: bigint }>(
        `SELECT endpoint_id, count(*) AS n FROM webhook_deliveries
         WHERE status = 'pending' AND lease_until > $1 GROUP BY endpoint_id`,
        [now],
      );
      for (const { endpoint_id, n } of counts) leased.set(endpoint_id, Number(n));
      const { rows: due } = await client.query<DueRow>(
        `SELECT * FROM (
           SELECT d.endpoint_id, d.event_id, d.attempts, w.url, w.secret, w.previous_secret,
                  w.previous_secret_until, e.type, e.occurred_at, e.data, d.next_attempt_at,
                  row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at) AS rank
           FROM webhook_deliveries d
           JOIN webhook_endpoints w ON w.id = d.endpoint_id
           JOIN events e ON e.id = d.event_id
           WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND (d.lease_until IS NULL OR d.lease_until <= $1)
             AND w.status = 'enabled'
         ) AS due WHERE rank <= $2 ORDER BY next_attempt_at LIMIT $3`,
        [now, perEndpoint, limit * 2],
      );
      const claimed: ClaimedDelivery[] = [];
      for (const row of due) {
        if (claimed.length >= limit) break;
        const n = leased.get(row.endpoint_id) ?? 0;
        if (n >= perEndpoint) continue;
        leased.set(row.endpoint_id, n + 1);
        const previousSigns =
          row.previous_secret !== null &&
          row.previous_secret_until !== null &&
          row.previous_secret_until.getTime() > now.getTime();
        claimed.push({
          endpointId: row.endpoint_id,
          eventId: row.event_id,
          attempts: row.attempts,
          url: row.url,
          secrets: previousSigns ? [row.secret, row.previous_secret as string] : [row.secret],
          body: eventJson({ id: row.event_id, type: row.type, occurredAt: row.occurred_at, data: row.data }),
          leaseUntil,
        });
      }
      if (claimed.length > 0) {
        await client.query(
          `UPDATE webhook_deliveries SET lease_until = $1
           FROM unnest($2::bigint[], $3::bigint[]) AS c(endpoint_id, event_id)
           WHERE webhook_deliveries.endpoint_id = c.endpoint_id AND webhook_deliveries.event_id = c.event_id`,
          [leaseUntil, claimed.map((c) => c.endpointId), claimed.map((c) => c.eventId)],
        );
      }
      return claimed;
    });
  }

  async recordAttempt(
    delivery: ClaimedDelivery,
    outcome: AttemptOutcome,
    disableIfFailingSince: Date,
  ): Promise<AttemptRecorded> {
    return inTransaction(this.#pool, async (client): Promise<AttemptRecorded> => {
      const status: WebhookDeliveryStatus = outcome.succeeded
        ? 'succeeded'
        : outcome.nextAttemptAt && !outcome.gone
          ? 'pending'
          : 'failed';
      const { rowCount } = await client.query(
        `UPDATE webhook_deliveries SET status = $1, attempts = attempts + 1, last_attempt_at = $2,
           next_attempt_at = $3, last_response_status = $4, last_error = $5, lease_until = NULL
         WHERE endpoint_id = $6 AND event_id = $7 AND lease_until = $8`,
        [
          status,
          outcome.at,
          status === 'pending' ? outcome.nextAttemptAt : null,
          outcome.responseStatus ?? null,
          outcome.error ?? null,
          delivery.endpointId,
          delivery.eventId,
          delivery.leaseUntil,
        ],
      );
      if (rowCount === 0) return { recorded: false };
      if (outcome.succeeded) {
        await client.query('UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1', [
          delivery.endpointId,
        ]);
        return { recorded: true, disabled: undefined, failed: false };
      }
      const { rows } = await client.query<{ failing_since: Date }>(
        `UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, $1) WHERE id = $2 RETURNING failing_since`,
        [outcome.at, delivery.endpointId],
      );
      const failingSince = rows[0]?.failing_since;
      const reason: DisabledReason | undefined = outcome.gone
        ? 'gone'
        : failingSince !== undefined && failingSince.getTime() <= disableIfFailingSince.getTime()
          ? 'failing'
          : undefined;
      if (!reason) return { recorded: true, disabled: undefined, failed: status === 'failed' };
      const { rowCount: disabled } = await client.query(
        `UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = $1 WHERE id = $2 AND status = 'enabled'`,
        [reason, delivery.endpointId],
      );
      // Its pending deliveries end here: once enabled again, it gets the events that occur after.
      await client.query(
        `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL,
           last_error = coalesce(last_error, 'the endpoint was disabled')
         WHERE endpoint_id = $1 AND status = 'pending' AND (lease_until IS NULL OR lease_until <= $2)`,
        [delivery.endpointId, outcome.at],
      );
      return {
        recorded: true,
        disabled: (disabled ?? 0) > 0 ? reason : undefined,
        failed: status === 'failed',
      };
    });
  }

  async releaseLeases(deliveries: readonly ClaimedDelivery[]): Promise<void> {
    if (deliveries.length === 0) return;
    await this.#pool.query(
      `UPDATE webhook_deliveries SET lease_until = NULL
       FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[]) AS c(endpoint_id, event_id, lease_until)
       WHERE webhook_deliveries.endpoint_id = c.endpoint_id AND webhook_deliveries.event_id = c.event_id
         AND webhook_deliveries.lease_until = c.lease_until`,
      [
        deliveries.map((d) => d.endpointId),
        deliveries.map((d) => d.eventId),
        deliveries.map((d) => d.leaseUntil),
      ],
    );
  }

  async nextDueAt(): Promise<Date | undefined> {
    const { rows } = await this.#pool.query<{ due: Date | null }>(
      `SELECT min(greatest(d.next_attempt_at, d.lease_until)) AS due FROM webhook_deliveries d
       JOIN webhook_endpoints w ON w.id = d.endpoint_id
       WHERE d.status = 'pending' AND w.status = 'enabled'`,
    );
    return rows[0]?.due ?? undefined;
  }

  async pending(): Promise<PendingDeliveries> {
    const { rows } = await this.#pool.query<{ n: bigint; oldest: Date | null }>(
      `SELECT count(*) AS n, min(e.occurred_at) AS oldest FROM webhook_deliveries d
       JOIN events e ON e.id = d.event_id WHERE d.status = 'pending'`,
    );
    return { count: Number(rows[0]?.n ?? 0n), oldestAt: rows[0]?.oldest ?? undefined };
  }

  count(): Promise<number> {
    return countRows(this.#pool, 'webhook_endpoints');
  }

  async importEndpoints(endpoints: readonly WebhookEndpoint[]): Promise<number> {
    if (endpoints.length === 0) return 0;
    return inTransaction(this.#pool, async (client) => {
      let inserted = 0;
      for (const e of endpoints) {
        const { rowCount } = await client.query(
          `INSERT INTO webhook_endpoints (${ENDPOINT_COLUMNS})
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING`,
          [
            e.id,
            e.url,
            e.types,
            e.description,
            e.status,
            e.disabledReason ?? null,
            e.createdAt,
            e.secret,
            e.previousSecret ?? null,
            e.previousSecretUntil ?? null,
          ],
        );
        inserted += rowCount ?? 0;
      }
      await client.query(
        `SELECT setval(seq, greatest((SELECT max(id) FROM webhook_endpoints), nextval(seq)))
         FROM CAST(pg_get_serial_sequence('webhook_endpoints', 'id') AS regclass) AS seq`,
      );
      return inserted;
    });
  }

  /** Opens one LISTEN connection on first use; a broken one is opened again after a pause. */
  watch(listener: () => void): () => void {
    this.#listeners.add(listener);
    if (!this.#listening) void this.#listen();
    return () => this.#listeners.delete(listener);
  }

  async #listen(): Promise<void> {
    if (this.#closed) return;
    const client = new pg.Client({
      connectionString: this.#url,
      application_name: 'petstore-listen',
      keepAlive: true,
    });
    this.#listening = client;
    const again = () => {
      if (this.#listening !== client || this.#closed) return;
      this.#listening = undefined;
      client.end().catch(() => undefined);
      setTimeout(() => {
        if (!this.#listening) void this.#listen();
        // A notification may have been missed meanwhile: wake the watchers to look.
        for (const listener of this.#listeners) listener();
      }, RELISTEN_MS).unref();
    };
    client.on('error', again);
    client.on('end', again);
    client.on('notification', () => {
      for (const listener of this.#listeners) listener();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${WEBHOOKS_CHANNEL}`);
    } catch {
      again();
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    const client = this.#listening;
    this.#listening = undefined;
    await client?.end().catch(() => undefined);
  }
}
