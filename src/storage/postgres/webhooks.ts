import type pg from 'pg';
import { IdempotencyKeyReusedError } from '../../domain/errors.js';
import { type EventType, eventJson, type NewEvent } from '../../domain/events.js';
import type { IdempotencyClaim } from '../../domain/storage.js';
import type { BucketState } from '../../domain/token-bucket.js';
import type {
  AttemptOutcome,
  AttemptRecorded,
  AttemptTrigger,
  Claim,
  ClaimedDelivery,
  ClaimLimits,
  DeliveryListQuery,
  DisabledReason,
  EndpointChanges,
  EndpointTypes,
  NewWebhookEndpoint,
  PendingDeliveries,
  RecoveryStart,
  RecoveryWindow,
  WebhookAttempt,
  WebhookDelivery,
  WebhookDeliveryStatus,
  WebhookEndpoint,
  WebhookEndpointStatus,
  WebhookStore,
} from '../../domain/webhooks.js';
import {
  claimable,
  disabledBy,
  endpointDisabled,
  RECORD_LINGER_MS,
  signingSecrets,
  statusAfter,
  throttleAfter,
  throttleAllows,
} from '../../domain/webhooks.js';
import { ATTEMPT_COLUMNS, type AttemptRow, toAttempt } from '../attempt-row.js';
import { CreateBatcher } from '../create-batcher.js';
import { RecoveryRefused } from '../recovery-refused.js';
import { countRows } from './count.js';
import { appendEvents, WEBHOOKS_CHANNEL } from './events.js';
import type { PostgresIdempotencyKeys } from './idempotency.js';
import type { PostgresNotifications } from './notifications.js';
import { inTransaction, type ReadPool } from './transaction.js';

/** Endpoint creates on every node take turns under this lock: WEBHOOK_MAX_ENDPOINTS is exact. */
const ENDPOINTS_LOCK = 7_304_118_263_520_004n;
/**
 * Delivery bookkeeping made in a transaction (claims, failed attempts) commits without waiting for the
 * write-ahead log to be flushed: a server crash could lose the last of it, and the worst that costs is
 * an attempt made again, which at-least-once delivery allows. Changes and their events keep
 * synchronous_commit on.
 */
const BEGIN_RELAXED = 'BEGIN; SET LOCAL synchronous_commit = off';

/**
 * A claim's endpoints: those enabled with a delivery due ($1 now), the one whose oldest due delivery has
 * waited longest first (so a busy endpoint never keeps a quiet one waiting for the claim's room), each
 * with the live leases on it ($2 this process, for `others`) and its throttle's bucket. Each row is
 * locked for the claim and skipped by any other claimer (SKIP LOCKED): claims of different endpoints
 * run side by side on any nodes, and an endpoint's leases are counted and taken by one claimer at a
 * time, so the per-endpoint bound and the throttle hold across nodes.
 */
const CLAIM_ENDPOINTS = `SELECT w.id, w.url, w.secret, w.previous_secret, w.previous_secret_until, w.rate_limit,
    w.throttle_tokens, w.throttle_at, l.leased, l.others
  FROM webhook_endpoints w
  CROSS JOIN LATERAL (
    SELECT min(d.next_attempt_at) AS due FROM webhook_deliveries d
    WHERE d.endpoint_id = w.id AND d.status = 'pending') oldest
  CROSS JOIN LATERAL (
    SELECT count(*)::int AS leased, (count(*) FILTER (WHERE d.lease_owner IS DISTINCT FROM $2))::int AS others
    FROM webhook_deliveries d
    WHERE d.endpoint_id = w.id AND d.lease_until > $1 AND d.status = 'pending') l
  WHERE w.status = 'enabled' AND oldest.due <= $1
  ORDER BY oldest.due, w.id
  FOR UPDATE OF w SKIP LOCKED`;

/** The claim's throttles: the buckets of the rate-limited endpoints it leased from. */
const CLAIM_THROTTLED = `UPDATE webhook_endpoints w SET throttle_tokens = t.tokens, throttle_at = t.at
  FROM unnest($1::bigint[], $2::float8[], $3::timestamptz[]) AS t(id, tokens, at) WHERE w.id = t.id`;

/**
 * Leases each endpoint's deliveries due first ($1 the endpoints, $2 how many of each, $3 now, $4 the
 * lease's end, $5 the owner), the earliest due first and then in event order, and returns them with their events. The due rows are found through the
 * (endpoint_id, next_attempt_at) index and updated by their row addresses (a TID scan). Sent unnamed,
 * so planned at each claim for the table's size then: a named statement keeps the plan made at its
 * first uses, and one made while the table held a few rows read every delivery of the endpoint for each
 * one leased (as a join: 40 ms a claim at 30,000 pending), or all of them once (a sequential scan, 10 ms
 * and growing). Planning it costs about 0.1 ms, once a round. The claimers' lock keeps another claim off
 * these rows meanwhile; a row changed between the two (a retry asked for, the endpoint disabled) is at
 * another address by then, and is left out.
 */
export const CLAIM_DUE = `WITH wanted AS (
    SELECT * FROM unnest($1::bigint[], $2::int[]) AS w(endpoint_id, n)
  ), leased AS (
    UPDATE webhook_deliveries d SET lease_until = $4, next_attempt_at = $4, lease_owner = $5
    WHERE d.ctid = ANY (ARRAY(
      SELECT due.ctid FROM wanted CROSS JOIN LATERAL (
        SELECT ctid FROM webhook_deliveries
        WHERE endpoint_id = wanted.endpoint_id AND status = 'pending' AND next_attempt_at <= $3
        ORDER BY next_attempt_at, event_id LIMIT wanted.n) due))
    RETURNING d.endpoint_id, d.event_id, d.attempts, d.next_trigger
  )
  SELECT leased.endpoint_id, leased.event_id, leased.attempts, leased.next_trigger, e.type, e.occurred_at,
    e.data, e.trace_context
  FROM leased JOIN events e ON e.id = leased.event_id
  ORDER BY leased.endpoint_id, leased.event_id`;

/**
 * A recovery's next batch ($5 at most) of the endpoint's failed deliveries after its cursor ($2), for
 * events in its window, moved back to pending in event order ($7: only while the endpoint is enabled);
 * and whether any it queued is still waiting for its attempt. NOTIFY wakes every node's deliverer.
 */
const RECOVER_BATCH_SQL = `WITH batch AS (
    SELECT d.event_id FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
    WHERE $7 AND d.endpoint_id = $1 AND d.status = 'failed' AND d.event_id > $2
      AND e.occurred_at >= $3 AND e.occurred_at < $4
    ORDER BY d.event_id LIMIT $5
  ), moved AS (
    UPDATE webhook_deliveries d SET status = 'pending', next_trigger = 'recover', next_attempt_at = $6,
      lease_until = NULL
    FROM batch WHERE d.endpoint_id = $1 AND d.event_id = batch.event_id
    RETURNING d.event_id
  )
  SELECT (SELECT count(*)::int FROM moved) AS moved, (SELECT max(event_id) FROM moved) AS last,
    EXISTS (SELECT 1 FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending'
      AND next_trigger = 'recover') AS recovering,
    CASE WHEN EXISTS (SELECT 1 FROM moved) THEN pg_notify('${WEBHOOKS_CHANNEL}', current_schema()) END`;

/**
 * Gives the events after the fan-out cursor ($1 at most) their deliveries and moves the cursor (fanOut).
 * The cursor is a scalar, so the events are read from it onwards through their primary key: as a join,
 * the planner (taking the one-row cursor table for thousands of rows) read the events from the first
 * one up to the cursor at every fan-out, a walk that grows with every event ever written.
 */
export const FAN_OUT = `WITH cursor AS (
               SELECT last_event_id FROM webhook_fanout FOR UPDATE SKIP LOCKED
             ), batch AS (
               SELECT e.id, e.type, e.occurred_at FROM events e
               WHERE e.id > (SELECT last_event_id FROM cursor) ORDER BY e.id LIMIT $1
             ), enabled AS (
               SELECT id, types, deliver_after FROM webhook_endpoints WHERE status = 'enabled'
             ), added AS (
               INSERT INTO webhook_deliveries (endpoint_id, event_id, status, attempts, next_attempt_at)
               SELECT w.id, b.id, 'pending', 0, b.occurred_at FROM batch b JOIN enabled w
                 ON w.deliver_after < b.id AND (w.types = '{*}' OR b.type = ANY (w.types))
               ON CONFLICT DO NOTHING
               RETURNING 1
             ), moved AS (
               UPDATE webhook_fanout SET last_event_id = CASE
                   WHEN EXISTS (SELECT 1 FROM enabled) THEN (SELECT max(id) FROM batch)
                   ELSE greatest(last_event_id, (SELECT coalesce(max(id), 0) FROM events)) END
               WHERE EXISTS (SELECT 1 FROM cursor)
                 AND (EXISTS (SELECT 1 FROM batch) OR NOT EXISTS (SELECT 1 FROM enabled))
               RETURNING 1
             )
             SELECT (SELECT count(*) FROM batch) AS events, EXISTS (SELECT 1 FROM enabled) AS enabled,
               CASE WHEN EXISTS (SELECT 1 FROM added) THEN pg_notify('${WEBHOOKS_CHANNEL}', current_schema()) END,
               (SELECT count(*) FROM moved) AS moved`;

interface AttemptResult {
  delivery: ClaimedDelivery;
  outcome: AttemptOutcome;
  disableIfFailingSince: Date;
}

interface EndpointRow {
  id: bigint;
  url: string;
  types: string[];
  description: string;
  rate_limit: number | null;
  status: WebhookEndpointStatus;
  disabled_reason: DisabledReason | null;
  created_at: Date;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: Date | null;
  last_success_at: Date | null;
  failing_since: Date | null;
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

const ENDPOINT_COLUMNS =
  'id, url, types, description, rate_limit, status, disabled_reason, created_at, secret, previous_secret, previous_secret_until, last_success_at, failing_since';
const DELIVERY_COLUMNS =
  'endpoint_id, event_id, status, attempts, last_attempt_at, next_attempt_at, last_response_status, last_error';

const toEndpoint = (row: EndpointRow): WebhookEndpoint => ({
  id: row.id,
  url: row.url,
  types: row.types as unknown as EndpointTypes,
  description: row.description,
  rateLimit: row.rate_limit ?? undefined,
  status: row.status,
  disabledReason: row.disabled_reason ?? undefined,
  createdAt: row.created_at,
  secret: row.secret,
  previousSecret: row.previous_secret ?? undefined,
  previousSecretUntil: row.previous_secret_until ?? undefined,
  lastSuccessAt: row.last_success_at ?? undefined,
  failingSince: row.failing_since ?? undefined,
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

/** An endpoint as a claim reads it (CLAIM_ENDPOINTS). */
interface ClaimEndpointRow {
  id: bigint;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: Date | null;
  rate_limit: number | null;
  throttle_tokens: number | null;
  throttle_at: Date | null;
  leased: number;
  others: number;
}

/** A delivery as a claim leases it (CLAIM_DUE). */
interface ClaimedRow {
  endpoint_id: bigint;
  event_id: bigint;
  attempts: number;
  next_trigger: AttemptTrigger;
  type: EventType;
  occurred_at: Date;
  data: string;
  trace_context: string | null;
}

const bucketOf = (row: ClaimEndpointRow): BucketState | undefined =>
  row.throttle_tokens === null || row.throttle_at === null
    ? undefined
    : { tokens: row.throttle_tokens, atMs: row.throttle_at.getTime() };

const claimedDelivery = (
  endpoint: ClaimEndpointRow,
  row: ClaimedRow,
  now: Date,
  leaseUntil: Date,
): ClaimedDelivery => ({
  endpointId: endpoint.id,
  eventId: row.event_id,
  attempts: row.attempts,
  trigger: row.next_trigger,
  url: endpoint.url,
  secrets: signingSecrets(
    endpoint.secret,
    endpoint.previous_secret ?? undefined,
    endpoint.previous_secret_until ?? undefined,
    now,
  ),
  body: eventJson({ id: row.event_id, type: row.type, occurredAt: row.occurred_at, data: row.data }),
  eventType: row.type,
  cause: row.trace_context ?? undefined,
  occurredAt: row.occurred_at,
  leaseUntil,
});

/**
 * Webhook endpoints and deliveries on PostgreSQL, for any number of nodes. A claim locks the endpoints it
 * leases from and skips those another claimer holds (CLAIM_ENDPOINTS): no two lease one delivery, and
 * the per-endpoint bound and throttle are exact; a commit that adds deliveries NOTIFYs every node (events.ts), which LISTENs here.
 */
export class PostgresWebhookStore implements WebhookStore {
  readonly #pool: pg.Pool;
  readonly #notifications: PostgresNotifications;
  /** recover's Idempotency-Key records. */
  readonly #idempotency: PostgresIdempotencyKeys;
  readonly #results = new CreateBatcher<AttemptResult, AttemptRecorded>(
    (results) => this.#recordAll(results),
    {
      name: 'webhooks.recordAttempt',
      lingerMs: RECORD_LINGER_MS,
    },
  );

  /** Where the API's reads go: the pool, or the replicas' router (replicas.ts). */
  readonly #reads: ReadPool;

  constructor(
    pool: pg.Pool,
    notifications: PostgresNotifications,
    idempotency: PostgresIdempotencyKeys,
    reads: ReadPool = pool,
  ) {
    this.#pool = pool;
    this.#reads = reads;
    this.#notifications = notifications;
    this.#idempotency = idempotency;
  }

  async #endpoint(db: ReadPool | pg.PoolClient, id: bigint): Promise<WebhookEndpoint | undefined> {
    const { rows } = await db.query<EndpointRow>(
      `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1`,
      [id],
    );
    return rows[0] && toEndpoint(rows[0]);
  }

  async createEndpoint(e: NewWebhookEndpoint, maxEndpoints: number): Promise<WebhookEndpoint | undefined> {
    // Creates take turns (the lock): each counts what the ones before it committed, so racing creates
    // on any nodes cannot pass the limit together.
    return inTransaction(this.#pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [ENDPOINTS_LOCK]);
      const { rows } = await client.query<EndpointRow>(
        `INSERT INTO webhook_endpoints (url, types, description, rate_limit, status, created_at, secret,
           deliver_after)
         SELECT $1, $2, $3, $4, 'enabled', $5, $6, (SELECT coalesce(max(id), 0) FROM events)
         WHERE (SELECT count(*) FROM webhook_endpoints) < $7
         RETURNING ${ENDPOINT_COLUMNS}`,
        [e.url, e.types, e.description, e.rateLimit ?? null, e.createdAt, e.secret, maxEndpoints],
      );
      return rows[0] && toEndpoint(rows[0]);
    });
  }

  async listEndpoints(afterId: bigint, limit: number): Promise<WebhookEndpoint[]> {
    const { rows } = await this.#reads.query<EndpointRow>(
      `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id > $1 ORDER BY id LIMIT $2`,
      [afterId, limit],
    );
    return rows.map(toEndpoint);
  }

  findEndpoint(id: bigint): Promise<WebhookEndpoint | undefined> {
    return this.#endpoint(this.#reads, id);
  }

  async updateEndpoint(id: bigint, changes: EndpointChanges): Promise<WebhookEndpoint | undefined> {
    // Each column named keeps its value unless the change names it; the secret is never touched.
    const { rows } = await this.#pool.query<EndpointRow>(
      `UPDATE webhook_endpoints SET url = coalesce($2, url), types = coalesce($3, types),
         description = coalesce($4, description), rate_limit = CASE WHEN $5 THEN $6::int ELSE rate_limit END
       WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`,
      [
        id,
        changes.url ?? null,
        changes.types ?? null,
        changes.description ?? null,
        changes.rateLimit !== undefined,
        changes.rateLimit ?? null,
      ],
    );
    return rows[0] && toEndpoint(rows[0]);
  }

  async deleteEndpoint(id: bigint): Promise<boolean> {
    const { rowCount } = await this.#pool.query('DELETE FROM webhook_endpoints WHERE id = $1', [id]);
    return (rowCount ?? 0) > 0;
  }

  async enableEndpoint(id: bigint): Promise<WebhookEndpoint | undefined> {
    const { rows } = await this.#pool.query<EndpointRow>(
      // Enabled again, it gets the events from now on; one enabled already keeps every event it is owed.
      `UPDATE webhook_endpoints SET status = 'enabled', disabled_reason = NULL, failing_since = NULL,
         deliver_after = CASE WHEN status = 'disabled' THEN (SELECT coalesce(max(id), 0) FROM events)
           ELSE deliver_after END
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
    // Only the filters given, so each is an index condition: `($n IS NULL OR status = $n)` is none.
    const where = ['endpoint_id = $1'];
    const values: unknown[] = [endpointId];
    if (beforeEventId !== undefined) where.push(`event_id < $${values.push(beforeEventId)}`);
    if (status !== undefined) where.push(`status = $${values.push(status)}`);
    const { rows } = await this.#reads.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE ${where.join(' AND ')}
       ORDER BY event_id DESC LIMIT $${values.push(limit)}`,
      values,
    );
    return rows.map(toDelivery);
  }

  async listAttempts(
    endpointId: bigint,
    eventId: bigint,
    afterNumber: number,
    limit: number,
  ): Promise<WebhookAttempt[] | undefined> {
    // One round trip: the delivery's row (is there one?) and its attempts after the position.
    const { rows } = await this.#reads.query<{ attempts: AttemptRow[] | null }>({
      name: 'webhooks_list_attempts',
      text: `SELECT (SELECT coalesce(json_agg(a ORDER BY a.number), '[]') FROM (
                 SELECT ${ATTEMPT_COLUMNS}
                 FROM webhook_attempts WHERE endpoint_id = $1 AND event_id = $2 AND number > $3
                 ORDER BY number LIMIT $4) a) AS attempts
             FROM webhook_deliveries WHERE endpoint_id = $1 AND event_id = $2`,
      values: [endpointId, eventId, afterNumber, limit],
    });
    const attempts = rows[0]?.attempts;
    if (!attempts) return undefined;
    return attempts.map(toAttempt);
  }

  async startRecovery(
    endpointId: bigint,
    window: RecoveryWindow,
    at: Date,
    idempotency?: IdempotencyClaim,
  ): Promise<RecoveryStart> {
    try {
      return await inTransaction(this.#pool, async (client): Promise<RecoveryStart> => {
        if (idempotency && !(await this.#idempotency.claim(client, idempotency))) {
          const recorded = await this.#idempotency.recorded(client, idempotency);
          if (recorded.requestHash !== idempotency.requestHash) throw new IdempotencyKeyReusedError();
          return { outcome: 'started', queued: Number(recorded.id), replayed: true };
        }
        // The endpoint's row, locked: recoveries of one endpoint asked for at once take turns.
        const { rows } = await client.query<{ status: WebhookEndpointStatus; running: boolean }>(
          `SELECT status, EXISTS (SELECT 1 FROM webhook_recoveries WHERE endpoint_id = $1) AS running
           FROM webhook_endpoints WHERE id = $1 FOR UPDATE`,
          [endpointId],
        );
        const endpoint = rows[0];
        // Refused: the key's claim goes with the rolled-back transaction, so a later request may use it.
        if (!endpoint) throw new RecoveryRefused({ outcome: 'not_found' });
        if (endpoint.status === 'disabled') throw new RecoveryRefused({ outcome: 'disabled' });
        if (endpoint.running) throw new RecoveryRefused({ outcome: 'running' });
        const { rows: counted } = await client.query<{ queued: number }>(
          `WITH counted AS (
             SELECT count(*)::int AS queued FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
             WHERE d.endpoint_id = $1 AND d.status = 'failed' AND e.occurred_at >= $2 AND e.occurred_at < $3
           ), started AS (
             INSERT INTO webhook_recoveries (endpoint_id, since, until, after_event_id, created_at)
             SELECT $1, $2, $3, 0, $4 FROM counted WHERE queued > 0
             RETURNING pg_notify('${WEBHOOKS_CHANNEL}', current_schema())
           )
           SELECT queued, (SELECT count(*) FROM started) AS started FROM counted`,
          [endpointId, window.since, window.until, at],
        );
        const queued = counted[0]?.queued ?? 0;
        if (idempotency) await this.#idempotency.attach(client, idempotency, BigInt(queued));
        return { outcome: 'started', queued, replayed: false };
      });
    } catch (error) {
      if (error instanceof RecoveryRefused) return error.outcome;
      throw error;
    }
  }

  /**
   * Each recovery's row is taken SKIP LOCKED: one node moves a recovery's batch, the others go on to
   * the next recovery or find nothing to do.
   */
  async recoverNext(now: Date, batch: number): Promise<number> {
    const { rows: any } = await this.#pool.query({
      name: 'webhooks_any_recovery',
      text: 'SELECT 1 FROM webhook_recoveries LIMIT 1',
    });
    if (any.length === 0) return 0;
    return inTransaction(
      this.#pool,
      async (client) => {
        const { rows: recoveries } = await client.query<{
          endpoint_id: bigint;
          enabled: boolean;
          since: Date;
          until: Date;
          after_event_id: bigint;
        }>(
          `SELECT r.endpoint_id, w.status = 'enabled' AS enabled, r.since, r.until, r.after_event_id
           FROM webhook_recoveries r JOIN webhook_endpoints w ON w.id = r.endpoint_id
           FOR UPDATE OF r SKIP LOCKED`,
        );
        let moved = 0;
        for (const r of recoveries) {
          const { rows } = await client.query<{ moved: number; last: bigint | null; recovering: boolean }>({
            name: 'webhooks_recover_batch',
            text: RECOVER_BATCH_SQL,
            values: [r.endpoint_id, r.after_event_id, r.since, r.until, batch, now, r.enabled],
          });
          const { moved: n = 0, last = null, recovering = false } = rows[0] ?? {};
          moved += n;
          if (last !== null)
            await client.query('UPDATE webhook_recoveries SET after_event_id = $2 WHERE endpoint_id = $1', [
              r.endpoint_id,
              last,
            ]);
          // Every batch queued and each attempted, or the endpoint disabled: the recovery is over.
          else if (!r.enabled || !recovering)
            await client.query('DELETE FROM webhook_recoveries WHERE endpoint_id = $1', [r.endpoint_id]);
        }
        return moved;
      },
      BEGIN_RELAXED,
    );
  }

  async retryDelivery(endpointId: bigint, eventId: bigint, at: Date): Promise<WebhookDelivery | undefined> {
    const { rows } = await this.#pool.query<DeliveryRow>(
      `WITH retried AS (
         -- An attempt under way (leased) keeps its lease: no second attempt beside it.
         UPDATE webhook_deliveries SET status = 'pending', next_trigger = 'retry',
           next_attempt_at = CASE WHEN lease_until > $3 THEN next_attempt_at ELSE $3 END
         WHERE endpoint_id = $1 AND event_id = $2 RETURNING ${DELIVERY_COLUMNS}
       ) SELECT retried.*, pg_notify('${WEBHOOKS_CHANNEL}', current_schema()) FROM retried`,
      [endpointId, eventId, at],
    );
    return rows[0] && toDelivery(rows[0]);
  }

  /**
   * Endpoint by endpoint (each bounded by what every node has leased already), the deliveries due first,
   * through the (endpoint_id, next_attempt_at) index: a backlog on one endpoint costs the others
   * nothing. A leased delivery is due again when its lease ends: a node that dies lets it go.
   */
  async claimDue(now: Date, leaseUntil: Date, limits: ClaimLimits): Promise<Claim> {
    const { limit, owner } = limits;
    const at = now.getTime();
    return inTransaction(
      this.#pool,
      async (client) => {
        const { rows: endpoints } = await client.query<ClaimEndpointRow>({
          name: 'webhooks_claim_endpoints',
          text: CLAIM_ENDPOINTS,
          values: [now, owner],
        });
        // How many of each endpoint to lease: its bound (claimable), its throttle, the claim's room.
        const wanted = new Map<
          bigint,
          { endpoint: ClaimEndpointRow; n: number; bucket: BucketState | undefined }
        >();
        let room = limit;
        let throttledUntil: Date | undefined;
        for (const endpoint of endpoints) {
          const bucket = bucketOf(endpoint);
          let n = Math.min(claimable(endpoint.id, endpoint.leased, endpoint.others, limits), room);
          if (endpoint.rate_limit !== null) n = throttleAllows(endpoint.rate_limit, bucket, at, n);
          if (n > 0) wanted.set(endpoint.id, { endpoint, n, bucket });
          else if (endpoint.rate_limit !== null) {
            const { nextAt } = throttleAfter(endpoint.rate_limit, bucket, at, 0);
            if (nextAt && (!throttledUntil || nextAt < throttledUntil)) throttledUntil = nextAt;
          }
          room -= n;
          if (room <= 0) break;
        }
        if (wanted.size === 0) return { deliveries: [], throttledUntil };
        const { rows } = await client.query<ClaimedRow>({
          // Unnamed: planned at each claim, for the table as it is then (see CLAIM_DUE).
          text: CLAIM_DUE,
          values: [[...wanted.keys()], [...wanted.values()].map((w) => w.n), now, leaseUntil, owner],
        });
        const deliveries = rows.map((row) =>
          claimedDelivery(
            (wanted.get(row.endpoint_id) as { endpoint: ClaimEndpointRow }).endpoint,
            row,
            now,
            leaseUntil,
          ),
        );
        // The throttled endpoints' buckets, less what was leased from each.
        const throttled: [bigint, number, Date][] = [];
        for (const { endpoint, bucket } of wanted.values()) {
          if (endpoint.rate_limit === null) continue;
          const leased = deliveries.filter((d) => d.endpointId === endpoint.id).length;
          const after = throttleAfter(endpoint.rate_limit, bucket, at, leased);
          if (leased > 0) throttled.push([endpoint.id, after.bucket.tokens, new Date(after.bucket.atMs)]);
          if (after.nextAt && (!throttledUntil || after.nextAt < throttledUntil))
            throttledUntil = after.nextAt;
        }
        if (throttled.length > 0)
          await client.query({
            name: 'webhooks_claim_throttled',
            text: CLAIM_THROTTLED,
            values: [throttled.map((t) => t[0]), throttled.map((t) => t[1]), throttled.map((t) => t[2])],
          });
        return { deliveries, throttledUntil };
      },
      BEGIN_RELAXED,
    );
  }

  /** Results arriving together share one transaction (as creates do). */
  recordAttempt(
    delivery: ClaimedDelivery,
    outcome: AttemptOutcome,
    disableIfFailingSince: Date,
  ): Promise<AttemptRecorded> {
    return this.#results.add({ delivery, outcome, disableIfFailingSince });
  }

  async #recordAll(results: readonly AttemptResult[]): Promise<AttemptRecorded[]> {
    if (results.every(({ outcome }) => outcome.succeeded)) return this.#recordSuccesses(results);
    return inTransaction(
      this.#pool,
      async (client) => {
        // Failures in order: each may start an endpoint's failing spell or disable it. The events of the
        // endpoints disabled are recorded last thing before COMMIT, as appendEvents asks.
        const recorded: AttemptRecorded[] = [];
        const disabled: NewEvent[] = [];
        for (const result of results) recorded.push(await this.#recordOne(client, result, disabled));
        await appendEvents(client, disabled);
        return recorded;
      },
      BEGIN_RELAXED,
    );
  }

  /**
   * The common case, every attempt of the batch answered 2xx: one statement, however many there are, so
   * one round trip where a transaction takes four. Its deliveries succeed and their endpoints' failing
   * spells end together, as one statement is atomic; committed durably (no transaction to relax).
   */
  async #recordSuccesses(results: readonly AttemptResult[]): Promise<AttemptRecorded[]> {
    const { rows } = await this.#pool.query<{ endpoint_id: bigint; event_id: bigint }>({
      name: 'webhooks_record_succeeded',
      text: `WITH done AS (
               UPDATE webhook_deliveries d SET status = 'succeeded', attempts = d.attempts + 1,
                 last_attempt_at = r.at, next_attempt_at = NULL, last_response_status = r.response_status,
                 last_error = NULL, lease_until = NULL, next_trigger = 'schedule'
               FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::timestamptz[], $5::int[],
                   $6::timestamptz[], $7::int[], $8::text[], $9::text[])
                 AS r(endpoint_id, event_id, lease_until, at, response_status, started_at, duration_ms,
                   response_body, trigger)
               WHERE d.endpoint_id = r.endpoint_id AND d.event_id = r.event_id AND d.lease_until = r.lease_until
               RETURNING d.endpoint_id, d.event_id, d.attempts, r.at, r.started_at, r.duration_ms,
                 r.response_status, r.response_body, r.trigger
             ), attempts_kept AS (
               INSERT INTO webhook_attempts (endpoint_id, event_id, number, started_at, duration_ms,
                 response_status, response_body, trigger)
               SELECT endpoint_id, event_id, attempts, started_at, duration_ms, response_status, response_body,
                 trigger FROM done
             ), spells_ended AS (
               -- Written only when it changes, or at most once a second: a success per delivery rewrote
               -- the endpoint's row each time.
               UPDATE webhook_endpoints w SET failing_since = NULL, last_success_at = s.at
               FROM (SELECT endpoint_id, max(at) AS at FROM done GROUP BY endpoint_id) s
               WHERE w.id = s.endpoint_id AND (w.failing_since IS NOT NULL OR w.last_success_at IS NULL
                 OR w.last_success_at < s.at - interval '1 second')
             )
             SELECT endpoint_id, event_id FROM done`,
      values: [
        results.map(({ delivery }) => delivery.endpointId),
        results.map(({ delivery }) => delivery.eventId),
        results.map(({ delivery }) => delivery.leaseUntil),
        results.map(({ outcome }) => outcome.at),
        results.map(({ outcome }) => outcome.responseStatus ?? null),
        results.map(({ outcome }) => outcome.startedAt),
        results.map(({ outcome }) => outcome.durationMs),
        results.map(({ outcome }) => outcome.responseBody ?? null),
        results.map(({ delivery }) => delivery.trigger),
      ],
    });
    // A lease that ran out and was taken again by another attempt: that one records instead.
    const done = new Set(rows.map((row) => `${row.endpoint_id}/${row.event_id}`));
    return results.map(
      ({ delivery }): AttemptRecorded =>
        done.has(`${delivery.endpointId}/${delivery.eventId}`)
          ? { recorded: true, disabled: undefined, failed: false }
          : { recorded: false },
    );
  }

  async #recordOne(
    client: pg.PoolClient,
    { delivery, outcome, disableIfFailingSince }: AttemptResult,
    events: NewEvent[],
  ): Promise<AttemptRecorded> {
    const status = statusAfter(outcome);
    const { rowCount } = await client.query({
      name: 'webhooks_record',
      text: `WITH recorded AS (
               UPDATE webhook_deliveries SET status = $1, attempts = attempts + 1, last_attempt_at = $2,
                 next_attempt_at = $3, last_response_status = $4, last_error = $5, lease_until = NULL,
                 next_trigger = 'schedule'
               WHERE endpoint_id = $6 AND event_id = $7 AND lease_until = $8
               RETURNING attempts
             )
             INSERT INTO webhook_attempts (endpoint_id, event_id, number, started_at, duration_ms,
               response_status, response_body, error, trigger)
             SELECT $6, $7, attempts, $9::timestamptz, $10::int, $4, $11::text, $12::text, $13::text FROM recorded`,
      values: [
        status,
        outcome.at,
        status === 'pending' ? outcome.nextAttemptAt : null,
        outcome.responseStatus ?? null,
        outcome.error ?? null,
        delivery.endpointId,
        delivery.eventId,
        delivery.leaseUntil,
        outcome.startedAt,
        outcome.durationMs,
        outcome.responseBody ?? null,
        outcome.noAnswer ?? null,
        delivery.trigger,
      ],
    });
    if (rowCount === 0) return { recorded: false };
    if (outcome.succeeded) {
      await client.query({
        name: 'webhooks_succeeded',
        text: `UPDATE webhook_endpoints SET failing_since = NULL, last_success_at = $2::timestamptz WHERE id = $1
                 AND (failing_since IS NOT NULL OR last_success_at IS NULL OR last_success_at < $2::timestamptz - interval '1 second')`,
        values: [delivery.endpointId, outcome.at],
      });
      return { recorded: true, disabled: undefined, failed: false };
    }
    const { rows } = await client.query<{ failing_since: Date }>({
      name: 'webhooks_failing',
      text: 'UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, $1) WHERE id = $2 RETURNING failing_since',
      values: [outcome.at, delivery.endpointId],
    });
    const reason = disabledBy(outcome, rows[0]?.failing_since, disableIfFailingSince);
    if (!reason) return { recorded: true, disabled: undefined, failed: status === 'failed' };
    // Only the update that finds it enabled disables it (and records the event): once, whoever races.
    const { rows: disabled } = await client.query<EndpointRow>(
      `UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = $1 WHERE id = $2 AND status = 'enabled'
       RETURNING ${ENDPOINT_COLUMNS}`,
      [reason, delivery.endpointId],
    );
    for (const row of disabled) events.push(endpointDisabled(toEndpoint(row), outcome.at));
    // Its pending deliveries end here: once enabled again, it gets the events that occur after.
    await client.query(
      `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL,
         last_error = coalesce(last_error, 'the endpoint was disabled')
       WHERE endpoint_id = $1 AND status = 'pending' AND (lease_until IS NULL OR lease_until <= $2)`,
      [delivery.endpointId, outcome.at],
    );
    return {
      recorded: true,
      disabled: disabled.length > 0 ? reason : undefined,
      failed: status === 'failed',
    };
  }

  /**
   * One statement, so one snapshot: the events after the cursor that it sees are every event up to the
   * newest it sees (ids are drawn in commit order, events.ts), and an endpoint it does not see yet was
   * created after them (its deliver_after is past them). The cursor's row is taken SKIP LOCKED: one node
   * fans out at a time, the others find nothing to do. With no enabled endpoint the cursor jumps to the
   * newest event: none is owed to anyone.
   */
  async fanOut(batch: number): Promise<number> {
    const { rows } = await this.#pool.query<{ events: string; enabled: boolean }>({
      name: 'webhooks_fan_out',
      text: FAN_OUT,
      values: [batch],
    });
    const row = rows[0];
    return row?.enabled ? Number(row.events) : 0;
  }

  async releaseLeases(deliveries: readonly ClaimedDelivery[]): Promise<void> {
    if (deliveries.length === 0) return;
    await this.#pool.query(
      `UPDATE webhook_deliveries SET lease_until = NULL, next_attempt_at = now()
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

  /** The earliest next_attempt_at of a pending delivery (a leased one's is its lease's end): one index lookup. */
  async nextDueAt(): Promise<Date | undefined> {
    const { rows } = await this.#pool.query<{ due: Date | null }>({
      name: 'webhooks_next_due',
      text: "SELECT min(next_attempt_at) AS due FROM webhook_deliveries WHERE status = 'pending'",
    });
    return rows[0]?.due ?? undefined;
  }

  async pending(): Promise<PendingDeliveries> {
    // An event not fanned out yet is a delivery waiting too: the oldest of those counts for the age.
    const { rows } = await this.#pool.query<{ n: bigint; oldest: Date | null }>(
      `SELECT count(*) AS n, least(min(e.occurred_at), (
           SELECT e.occurred_at FROM events e, webhook_fanout f
           WHERE e.id > f.last_event_id AND EXISTS (SELECT 1 FROM webhook_endpoints WHERE status = 'enabled')
           ORDER BY e.id LIMIT 1)) AS oldest
       FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.status = 'pending'`,
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
          `INSERT INTO webhook_endpoints (${ENDPOINT_COLUMNS}, deliver_after)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
             (SELECT coalesce(max(id), 0) FROM events))
           ON CONFLICT (id) DO NOTHING`,
          [
            e.id,
            e.url,
            e.types,
            e.description,
            e.rateLimit ?? null,
            e.status,
            e.disabledReason ?? null,
            e.createdAt,
            e.secret,
            e.previousSecret ?? null,
            e.previousSecretUntil ?? null,
            e.lastSuccessAt ?? null,
            e.failingSince ?? null,
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

  /** Woken by the node's one LISTEN connection (notifications.ts). */
  watch(listener: () => void): () => void {
    return this.#notifications.watch(WEBHOOKS_CHANNEL, listener);
  }
}
