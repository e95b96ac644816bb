import type Database from 'better-sqlite3';
import { IdempotencyKeyReusedError } from '../../domain/errors.js';
import { type EventType, eventJson } from '../../domain/events.js';
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
import { type SqliteEventLog, watchOtherProcesses } from './events.js';
import type { SqliteIdempotencyKeys } from './idempotency.js';

interface EndpointRow {
  id: bigint;
  url: string;
  types: string;
  description: string;
  rate_limit: bigint | null;
  status: WebhookEndpointStatus;
  disabled_reason: DisabledReason | null;
  created_at: bigint;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: bigint | null;
  last_success_at: bigint | null;
  failing_since: bigint | null;
}

/** A rate-limited endpoint's token bucket (throttleAllows): null until its first claim. */
interface ThrottleRow {
  throttle_tokens: number | null;
  throttle_at: bigint | null;
}

const bucketOf = (row: ThrottleRow): BucketState | undefined =>
  row.throttle_tokens === null || row.throttle_at === null
    ? undefined
    : { tokens: row.throttle_tokens, atMs: Number(row.throttle_at) };

interface DeliveryRow {
  endpoint_id: bigint;
  event_id: bigint;
  status: WebhookDeliveryStatus;
  attempts: bigint;
  last_attempt_at: bigint | null;
  next_attempt_at: bigint | null;
  last_response_status: bigint | null;
  last_error: string | null;
}

const ENDPOINT_COLUMNS =
  'id, url, types, description, rate_limit, status, disabled_reason, created_at, secret, previous_secret, previous_secret_until, last_success_at, failing_since';
const DELIVERY_COLUMNS =
  'endpoint_id, event_id, status, attempts, last_attempt_at, next_attempt_at, last_response_status, last_error';

/** When the first event the fan-out has not reached occurred, while any endpoint is enabled to want it. */
const FIRST_NOT_FANNED_OUT = `SELECT e.occurred_at FROM events e, webhook_fanout f
  WHERE e.id > f.last_event_id AND EXISTS (SELECT 1 FROM webhook_endpoints WHERE status = 'enabled')
  ORDER BY e.id LIMIT 1`;

const date = (ms: bigint | null): Date | undefined => (ms === null ? undefined : new Date(Number(ms)));

/** Types as one column: `*`, or the types separated by spaces (matched with instr in the fan-out). */
export const typesText = (types: EndpointTypes): string => types.join(' ');
export const typesOf = (text: string): EndpointTypes => text.split(' ') as unknown as EndpointTypes;

const toEndpoint = (row: EndpointRow): WebhookEndpoint => ({
  id: row.id,
  url: row.url,
  types: typesOf(row.types),
  description: row.description,
  rateLimit: row.rate_limit === null ? undefined : Number(row.rate_limit),
  status: row.status,
  disabledReason: row.disabled_reason ?? undefined,
  createdAt: new Date(Number(row.created_at)),
  secret: row.secret,
  previousSecret: row.previous_secret ?? undefined,
  previousSecretUntil: date(row.previous_secret_until),
  lastSuccessAt: date(row.last_success_at),
  failingSince: date(row.failing_since),
});

const toDelivery = (row: DeliveryRow): WebhookDelivery => ({
  endpointId: row.endpoint_id,
  eventId: row.event_id,
  status: row.status,
  attempts: Number(row.attempts),
  lastAttemptAt: date(row.last_attempt_at),
  nextAttemptAt: date(row.next_attempt_at),
  lastResponseStatus: row.last_response_status === null ? undefined : Number(row.last_response_status),
  lastError: row.last_error ?? undefined,
});

interface AttemptResult {
  delivery: ClaimedDelivery;
  outcome: AttemptOutcome;
  disableIfFailingSince: Date;
}

/** The SQL of each statement below, by name: what a test reads the query plans of. */
export const deliveryStatementTexts = (db: Database.Database): Record<string, string> =>
  Object.fromEntries(
    Object.entries(prepareDeliveryStatements(db)).map(([name, statement]) => [name, statement.source]),
  );

/**
 * The statements the deliverer runs all the time, prepared once: on every claim, attempt and wake-up.
 * Each is an index search, whatever the backlog.
 */
function prepareDeliveryStatements(db: Database.Database) {
  return {
    // INDEXED BY: left to itself SQLite walks the pending index for the GROUP BY, i.e. the whole backlog
    // (3.5 ms a claim at 50,000 pending); the leases are the few rows the leased index holds.
    leasedByEndpoint: db
      .prepare<[string, number], [bigint, bigint, bigint]>(
        `SELECT endpoint_id, count(*), sum(lease_owner IS NOT ?)
         FROM webhook_deliveries INDEXED BY webhook_deliveries_leased
         WHERE lease_until IS NOT NULL AND lease_until > ? AND status = 'pending' GROUP BY endpoint_id`,
      )
      .raw(true)
      .safeIntegers(true),
    // The endpoints with a delivery due, the one whose oldest due delivery has waited longest first: a
    // busy endpoint never keeps a quiet one waiting for the claim's room. Each oldest is an index lookup.
    dueEndpoints: db
      .prepare<[number], EndpointRow & ThrottleRow>(
        `SELECT ${ENDPOINT_COLUMNS}, throttle_tokens, throttle_at FROM (
           SELECT w.*, (SELECT min(next_attempt_at) FROM webhook_deliveries
                        WHERE endpoint_id = w.id AND status = 'pending') AS oldest
           FROM webhook_endpoints w WHERE w.status = 'enabled')
         WHERE oldest <= ? ORDER BY oldest, id`,
      )
      .safeIntegers(true),
    throttled: db.prepare<[number, number, bigint]>(
      'UPDATE webhook_endpoints SET throttle_tokens = ?, throttle_at = ? WHERE id = ?',
    ),
    dueOfEndpoint: db
      .prepare<
        [bigint, number, number],
        [bigint, bigint, EventType, bigint, string, string | null, AttemptTrigger]
      >(
        `SELECT d.event_id, d.attempts, e.type, e.occurred_at, e.data, e.trace_context, d.next_trigger
         FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
         WHERE d.endpoint_id = ? AND d.status = 'pending' AND d.next_attempt_at <= ?
         ORDER BY d.next_attempt_at, d.event_id LIMIT ?`,
      )
      .raw(true)
      .safeIntegers(true),
    // Leased: due again when the lease ends (the node that holds it may die).
    lease: db.prepare<[{ until: number; owner: string; endpointId: bigint; eventId: bigint }]>(
      `UPDATE webhook_deliveries SET lease_until = @until, next_attempt_at = @until, lease_owner = @owner
       WHERE endpoint_id = @endpointId AND event_id = @eventId`,
    ),
    record: db.prepare(
      `UPDATE webhook_deliveries SET status = @status, attempts = attempts + 1, last_attempt_at = @at,
         next_attempt_at = @next, last_response_status = @responseStatus, last_error = @error, lease_until = NULL,
         next_trigger = 'schedule'
       WHERE endpoint_id = @endpointId AND event_id = @eventId AND lease_until = @lease`,
    ),
    attempt: db.prepare(
      `INSERT INTO webhook_attempts (endpoint_id, event_id, number, started_at, duration_ms, response_status,
         response_body, error, trigger)
       VALUES (@endpointId, @eventId, @number, @startedAt, @durationMs, @responseStatus, @responseBody,
         @noAnswer, @trigger)`,
    ),
    // Written only when it changes: a success per delivery rewrote the endpoint's row each time.
    // ...and last_success_at at most once a second.
    succeeded: db.prepare<[{ at: number; endpointId: bigint }]>(
      `UPDATE webhook_endpoints SET failing_since = NULL, last_success_at = @at WHERE id = @endpointId
         AND (failing_since IS NOT NULL OR last_success_at IS NULL OR last_success_at < @at - 1000)`,
    ),
    failing: db
      .prepare<[number, bigint], bigint>(
        'UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, ?) WHERE id = ? RETURNING failing_since',
      )
      .pluck()
      .safeIntegers(true),
    // Only the update that finds it enabled disables it (and records the event): once, whoever races.
    disable: db
      .prepare<[DisabledReason, bigint], EndpointRow>(
        `UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = ? WHERE id = ? AND status = 'enabled'
         RETURNING ${ENDPOINT_COLUMNS}`,
      )
      .safeIntegers(true),
    endPending: db.prepare(
      `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL,
         last_error = coalesce(last_error, 'the endpoint was disabled')
       WHERE endpoint_id = @endpointId AND status = 'pending' AND (lease_until IS NULL OR lease_until <= @at)`,
    ),
    release: db.prepare<[number, bigint, bigint, number]>(
      `UPDATE webhook_deliveries SET lease_until = NULL, next_attempt_at = ?
       WHERE endpoint_id = ? AND event_id = ? AND lease_until = ?`,
    ),
    fanOutFrom: db.prepare<[], bigint>('SELECT last_event_id FROM webhook_fanout').pluck().safeIntegers(true),
    fanOutTo: db
      .prepare<[bigint, number], [bigint | null, bigint]>(
        'SELECT max(id), count(*) FROM (SELECT id FROM events WHERE id > ? ORDER BY id LIMIT ?)',
      )
      .raw(true)
      .safeIntegers(true),
    // An endpoint gets an event committed after it was created or enabled again (deliver_after), as
    // when deliveries were made in the change's own transaction.
    fanOut: db.prepare<{ from: bigint; to: bigint }>(
      `INSERT INTO webhook_deliveries (endpoint_id, event_id, status, attempts, next_attempt_at)
       SELECT w.id, e.id, 'pending', 0, e.occurred_at FROM events e JOIN webhook_endpoints w
         ON w.status = 'enabled' AND w.deliver_after < e.id
           AND (w.types = '*' OR instr(' ' || w.types || ' ', ' ' || e.type || ' ') > 0)
       WHERE e.id > @from AND e.id <= @to
       ON CONFLICT DO NOTHING`,
    ),
    fannedOutTo: db.prepare<[bigint]>('UPDATE webhook_fanout SET last_event_id = ?'),
    anyEnabled: db
      .prepare<[], number>("SELECT 1 FROM webhook_endpoints WHERE status = 'enabled' LIMIT 1")
      .pluck(),
    // No endpoint to fan out to: none is owed any event so far (one created later starts after them).
    skipFanOut: db.prepare(
      'UPDATE webhook_fanout SET last_event_id = (SELECT coalesce(max(id), 0) FROM events)',
    ),
    anyRecovery: db.prepare<[], number>('SELECT 1 FROM webhook_recoveries LIMIT 1').pluck(),
    endpointStatus: db
      .prepare<[bigint], WebhookEndpointStatus>('SELECT status FROM webhook_endpoints WHERE id = ?')
      .pluck(),
    recoveryOf: db
      .prepare<[bigint], number>('SELECT 1 FROM webhook_recoveries WHERE endpoint_id = ?')
      .pluck(),
    failedInWindow: db
      .prepare<[bigint, number, number], number>(
        `SELECT count(*) FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
         WHERE d.endpoint_id = ? AND d.status = 'failed' AND e.occurred_at >= ? AND e.occurred_at < ?`,
      )
      .pluck(),
    recoveryStarted: db.prepare<[bigint, number, number, number]>(
      `INSERT INTO webhook_recoveries (endpoint_id, since, until, after_event_id, created_at)
       VALUES (?, ?, ?, 0, ?)`,
    ),
    recoveries: db
      .prepare<
        [],
        {
          endpoint_id: bigint;
          status: WebhookEndpointStatus;
          since: bigint;
          until: bigint;
          after_event_id: bigint;
        }
      >(
        `SELECT r.endpoint_id, w.status, r.since, r.until, r.after_event_id
         FROM webhook_recoveries r JOIN webhook_endpoints w ON w.id = r.endpoint_id`,
      )
      .safeIntegers(true),
    // Through the (endpoint_id, status, event_id) index from the recovery's cursor, in event order.
    recoverable: db
      .prepare<[bigint, bigint, bigint, bigint, number], bigint>(
        `SELECT d.event_id FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
         WHERE d.endpoint_id = ? AND d.status = 'failed' AND d.event_id > ?
           AND e.occurred_at >= ? AND e.occurred_at < ?
         ORDER BY d.event_id LIMIT ?`,
      )
      .pluck()
      .safeIntegers(true),
    recovered: db.prepare<[{ at: number; endpointId: bigint; eventId: bigint }]>(
      `UPDATE webhook_deliveries SET status = 'pending', next_trigger = 'recover', next_attempt_at = @at,
         lease_until = NULL
       WHERE endpoint_id = @endpointId AND event_id = @eventId AND status = 'failed'`,
    ),
    recoveredTo: db.prepare<[bigint, bigint]>(
      'UPDATE webhook_recoveries SET after_event_id = ? WHERE endpoint_id = ?',
    ),
    // A delivery the recovery queued that is not attempted yet.
    recovering: db
      .prepare<[bigint], number>(
        `SELECT 1 FROM webhook_deliveries
         WHERE endpoint_id = ? AND status = 'pending' AND next_trigger = 'recover' LIMIT 1`,
      )
      .pluck(),
    recoveryDone: db.prepare<[bigint]>('DELETE FROM webhook_recoveries WHERE endpoint_id = ?'),
    nextDue: db
      .prepare<[], bigint | null>(
        "SELECT min(next_attempt_at) FROM webhook_deliveries WHERE status = 'pending'",
      )
      .pluck()
      .safeIntegers(true),
  };
}

/**
 * Webhook endpoints and deliveries on SQLite; instants in epoch milliseconds. Claiming runs in an
 * IMMEDIATE transaction: one writer at a time, across processes on the file, so no two claim one
 * delivery and the per-endpoint bound counts every process's leases.
 */
export class SqliteWebhookStore implements WebhookStore {
  readonly #db: Database.Database;
  readonly #log: SqliteEventLog;
  /** recover's Idempotency-Key records. */
  readonly #idempotency: SqliteIdempotencyKeys;

  readonly #sql: ReturnType<typeof prepareDeliveryStatements>;
  readonly #claimAll: Database.Transaction<(at: number, until: number, limits: ClaimLimits) => Claim>;
  readonly #results: CreateBatcher<AttemptResult, AttemptRecorded>;

  constructor(db: Database.Database, log: SqliteEventLog, idempotency: SqliteIdempotencyKeys) {
    this.#db = db;
    this.#log = log;
    this.#idempotency = idempotency;
    this.#sql = prepareDeliveryStatements(db);
    this.#claimAll = db.transaction((at: number, until: number, limits: ClaimLimits) =>
      this.#claim(at, until, limits),
    );
    const recordAll = db.transaction((results: readonly AttemptResult[]) =>
      results.map((result) => this.#recordOne(result)),
    );
    this.#results = new CreateBatcher((results) => this.#relaxed(() => recordAll.immediate(results)), {
      name: 'webhooks.recordAttempt',
      lingerMs: RECORD_LINGER_MS,
    });
  }

  #endpoint(id: bigint): WebhookEndpoint | undefined {
    const row = this.#db
      .prepare<[bigint], EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ?`)
      .safeIntegers(true)
      .get(id);
    return row && toEndpoint(row);
  }

  async createEndpoint(e: NewWebhookEndpoint, maxEndpoints: number): Promise<WebhookEndpoint | undefined> {
    // One statement, and SQLite has one writer at a time: racing creates cannot pass the limit together.
    const id = this.#db
      .prepare<[string, string, string, number | null, number, string, number], bigint>(
        `INSERT INTO webhook_endpoints (url, types, description, rate_limit, status, created_at, secret, deliver_after)
         SELECT ?, ?, ?, ?, 'enabled', ?, ?, (SELECT coalesce(max(id), 0) FROM events)
         WHERE (SELECT count(*) FROM webhook_endpoints) < ? RETURNING id`,
      )
      .pluck()
      .safeIntegers(true)
      .get(
        e.url,
        typesText(e.types),
        e.description,
        e.rateLimit ?? null,
        e.createdAt.getTime(),
        e.secret,
        maxEndpoints,
      );
    return id === undefined ? undefined : this.#endpoint(id);
  }

  async listEndpoints(afterId: bigint, limit: number): Promise<WebhookEndpoint[]> {
    return this.#db
      .prepare<[bigint, number], EndpointRow>(
        `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id > ? ORDER BY id LIMIT ?`,
      )
      .safeIntegers(true)
      .all(afterId, limit)
      .map(toEndpoint);
  }

  async findEndpoint(id: bigint): Promise<WebhookEndpoint | undefined> {
    return this.#endpoint(id);
  }

  async updateEndpoint(id: bigint, changes: EndpointChanges): Promise<WebhookEndpoint | undefined> {
    // Each column named keeps its value unless the change names it; the secret is never touched.
    const row = this.#db
      .prepare<[Record<string, unknown>], EndpointRow>(
        `UPDATE webhook_endpoints SET url = coalesce(@url, url), types = coalesce(@types, types),
           description = coalesce(@description, description),
           rate_limit = CASE WHEN @setRateLimit THEN @rateLimit ELSE rate_limit END
         WHERE id = @id RETURNING ${ENDPOINT_COLUMNS}`,
      )
      .safeIntegers(true)
      .get({
        id,
        url: changes.url ?? null,
        types: changes.types ? typesText(changes.types) : null,
        description: changes.description ?? null,
        setRateLimit: changes.rateLimit === undefined ? 0 : 1,
        rateLimit: changes.rateLimit ?? null,
      });
    return row && toEndpoint(row);
  }

  async deleteEndpoint(id: bigint): Promise<boolean> {
    // The deliveries go with it (ON DELETE CASCADE).
    return this.#db.prepare<[bigint]>('DELETE FROM webhook_endpoints WHERE id = ?').run(id).changes > 0;
  }

  async enableEndpoint(id: bigint): Promise<WebhookEndpoint | undefined> {
    this.#db
      .prepare<[bigint]>(
        // Enabled again, it gets the events from now on; one enabled already keeps every event it is owed.
        `UPDATE webhook_endpoints SET status = 'enabled', disabled_reason = NULL, failing_since = NULL,
           deliver_after = CASE WHEN status = 'disabled' THEN (SELECT coalesce(max(id), 0) FROM events)
             ELSE deliver_after END
         WHERE id = ?`,
      )
      .run(id);
    return this.#endpoint(id);
  }

  async rotateSecret(id: bigint, secret: string, previousUntil: Date): Promise<WebhookEndpoint | undefined> {
    this.#db
      .prepare<[string, number, bigint]>(
        `UPDATE webhook_endpoints SET previous_secret = secret, secret = ?, previous_secret_until = ? WHERE id = ?`,
      )
      .run(secret, previousUntil.getTime(), id);
    return this.#endpoint(id);
  }

  async listDeliveries({
    endpointId,
    beforeEventId,
    status,
    limit,
  }: DeliveryListQuery): Promise<WebhookDelivery[]> {
    const where = ['endpoint_id = ?'];
    const values: unknown[] = [endpointId];
    if (beforeEventId !== undefined) {
      where.push('event_id < ?');
      values.push(beforeEventId);
    }
    if (status !== undefined) {
      where.push('status = ?');
      values.push(status);
    }
    return this.#db
      .prepare<unknown[], DeliveryRow>(
        `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE ${where.join(' AND ')} ORDER BY event_id DESC LIMIT ?`,
      )
      .safeIntegers(true)
      .all(...values, limit)
      .map(toDelivery);
  }

  async listAttempts(
    endpointId: bigint,
    eventId: bigint,
    afterNumber: number,
    limit: number,
  ): Promise<WebhookAttempt[] | undefined> {
    const exists = this.#db
      .prepare<[bigint, bigint], number>(
        'SELECT 1 FROM webhook_deliveries WHERE endpoint_id = ? AND event_id = ?',
      )
      .pluck()
      .get(endpointId, eventId);
    if (exists === undefined) return undefined;
    return this.#db
      .prepare<[bigint, bigint, number, number], AttemptRow>(
        `SELECT ${ATTEMPT_COLUMNS}
         FROM webhook_attempts WHERE endpoint_id = ? AND event_id = ? AND number > ? ORDER BY number LIMIT ?`,
      )
      .all(endpointId, eventId, afterNumber, limit)
      .map(toAttempt);
  }

  async startRecovery(
    endpointId: bigint,
    window: RecoveryWindow,
    at: Date,
    idempotency?: IdempotencyClaim,
  ): Promise<RecoveryStart> {
    let started: RecoveryStart;
    try {
      started = this.#db
        .transaction((): RecoveryStart => {
          if (idempotency && !this.#idempotency.claim(idempotency)) {
            const recorded = this.#idempotency.recorded(idempotency);
            if (recorded.requestHash !== idempotency.requestHash) throw new IdempotencyKeyReusedError();
            return { outcome: 'started', queued: Number(recorded.id), replayed: true };
          }
          const refused = this.#recoveryRefused(endpointId);
          // Refused: the key's claim goes with the rolled-back transaction, so a later request may use it.
          if (refused) throw new RecoveryRefused(refused);
          const queued = this.#sql.failedInWindow.get(
            endpointId,
            window.since.getTime(),
            window.until.getTime(),
          ) as number;
          if (queued > 0)
            this.#sql.recoveryStarted.run(
              endpointId,
              window.since.getTime(),
              window.until.getTime(),
              at.getTime(),
            );
          if (idempotency) this.#idempotency.attach(idempotency, BigInt(queued));
          return { outcome: 'started', queued, replayed: false };
        })
        .immediate();
    } catch (error) {
      if (error instanceof RecoveryRefused) return error.outcome;
      throw error;
    }
    if (started.outcome === 'started' && started.queued > 0 && !started.replayed) this.#log.wake();
    return started;
  }

  /** Why the endpoint cannot start a recovery now, if it cannot. */
  #recoveryRefused(endpointId: bigint): RecoveryRefused['outcome'] | undefined {
    const status = this.#sql.endpointStatus.get(endpointId);
    if (status === undefined) return { outcome: 'not_found' };
    if (status === 'disabled') return { outcome: 'disabled' };
    if (this.#sql.recoveryOf.get(endpointId) !== undefined) return { outcome: 'running' };
    return undefined;
  }

  async recoverNext(now: Date, batch: number): Promise<number> {
    // A read first: with no recovery under way (nearly always), no write transaction.
    if (this.#sql.anyRecovery.get() === undefined) return 0;
    const moved = this.#relaxed(() =>
      this.#db
        .transaction(() => {
          let moved = 0;
          for (const r of this.#sql.recoveries.all()) {
            const ids =
              r.status === 'enabled'
                ? this.#sql.recoverable.all(r.endpoint_id, r.after_event_id, r.since, r.until, batch)
                : [];
            for (const eventId of ids)
              this.#sql.recovered.run({ at: now.getTime(), endpointId: r.endpoint_id, eventId });
            moved += ids.length;
            const last = ids.at(-1);
            if (last !== undefined) this.#sql.recoveredTo.run(last, r.endpoint_id);
            // Every batch queued and each attempted, or the endpoint disabled: the recovery is over.
            else if (r.status !== 'enabled' || this.#sql.recovering.get(r.endpoint_id) === undefined)
              this.#sql.recoveryDone.run(r.endpoint_id);
          }
          return moved;
        })
        .immediate(),
    );
    if (moved > 0) this.#log.wake();
    return moved;
  }

  async retryDelivery(endpointId: bigint, eventId: bigint, at: Date): Promise<WebhookDelivery | undefined> {
    const row = this.#db
      .prepare<[{ at: number; endpointId: bigint; eventId: bigint }], DeliveryRow>(
        // An attempt under way (leased) keeps its lease: no second attempt beside it.
        `UPDATE webhook_deliveries SET status = 'pending', next_trigger = 'retry',
           next_attempt_at = CASE WHEN lease_until > @at THEN next_attempt_at ELSE @at END
         WHERE endpoint_id = @endpointId AND event_id = @eventId RETURNING ${DELIVERY_COLUMNS}`,
      )
      .safeIntegers(true)
      .get({ at: at.getTime(), endpointId, eventId });
    if (row) this.#log.wake();
    return row && toDelivery(row);
  }

  /**
   * Delivery bookkeeping (leases, attempt results) commits without waiting for the disk
   * (synchronous=NORMAL, for these transactions only: better-sqlite3 runs one at a time): in WAL mode a
   * process crash loses none of it, and what a power loss could lose is at worst an attempt made again,
   * which at-least-once delivery allows. Changes and their events keep FULL: a 201 is on disk.
   */
  #relaxed<T>(work: () => T): T {
    this.#db.pragma('synchronous = NORMAL');
    try {
      return work();
    } finally {
      this.#db.pragma('synchronous = FULL');
    }
  }

  async claimDue(now: Date, leaseUntil: Date, limits: ClaimLimits): Promise<Claim> {
    return this.#relaxed(() => this.#claimAll.immediate(now.getTime(), leaseUntil.getTime(), limits));
  }

  /**
   * Endpoint by endpoint (each bounded by what it has leased already, on every process), the deliveries
   * due first, through the (endpoint_id, next_attempt_at) index: a backlog on one endpoint costs the
   * others nothing. A leased delivery is due again when its lease ends: a process that dies lets it go.
   */
  #claim(at: number, until: number, limits: ClaimLimits): Claim {
    const { limit, owner } = limits;
    const leased = new Map<bigint, [number, number]>();
    for (const [endpointId, n, others] of this.#sql.leasedByEndpoint.all(owner, at))
      leased.set(endpointId, [Number(n), Number(others)]);
    const claimed: ClaimedDelivery[] = [];
    let throttledUntil: Date | undefined;
    for (const endpoint of this.#sql.dueEndpoints.all(at)) {
      const [n, others] = leased.get(endpoint.id) ?? [0, 0];
      const rateLimit = endpoint.rate_limit === null ? undefined : Number(endpoint.rate_limit);
      const bucket = bucketOf(endpoint);
      let free = Math.min(claimable(endpoint.id, n, others, limits), limit - claimed.length);
      if (rateLimit !== undefined) free = throttleAllows(rateLimit, bucket, at, free);
      const before = claimed.length;
      if (free > 0) this.#claimOf(endpoint, at, until, owner, free, claimed);
      if (rateLimit !== undefined) {
        const after = throttleAfter(rateLimit, bucket, at, claimed.length - before);
        if (claimed.length > before)
          this.#sql.throttled.run(after.bucket.tokens, after.bucket.atMs, endpoint.id);
        if (after.nextAt && (!throttledUntil || after.nextAt < throttledUntil)) throttledUntil = after.nextAt;
      }
      if (claimed.length >= limit) break;
    }
    return { deliveries: claimed, throttledUntil };
  }

  /** Leases up to `free` of the endpoint's due deliveries, the earliest due first, into `claimed`. */
  #claimOf(
    endpoint: EndpointRow,
    at: number,
    until: number,
    owner: string,
    free: number,
    claimed: ClaimedDelivery[],
  ): void {
    const secrets = signingSecrets(
      endpoint.secret,
      endpoint.previous_secret ?? undefined,
      date(endpoint.previous_secret_until),
      new Date(at),
    );
    for (const [eventId, attempts, type, occurredAt, data, cause, trigger] of this.#sql.dueOfEndpoint.all(
      endpoint.id,
      at,
      free,
    )) {
      this.#sql.lease.run({ until, owner, endpointId: endpoint.id, eventId });
      claimed.push({
        endpointId: endpoint.id,
        eventId,
        attempts: Number(attempts),
        trigger,
        url: endpoint.url,
        secrets,
        body: eventJson({ id: eventId, type, occurredAt: new Date(Number(occurredAt)), data }),
        occurredAt: new Date(Number(occurredAt)),
        eventType: type,
        cause: cause ?? undefined,
        leaseUntil: new Date(until),
      });
    }
  }

  async fanOut(batch: number): Promise<number> {
    return this.#relaxed(() =>
      this.#db
        .transaction(() => {
          if (this.#sql.anyEnabled.get() === undefined) {
            this.#sql.skipFanOut.run();
            return 0;
          }
          const from = this.#sql.fanOutFrom.get() as bigint;
          const [to, count] = this.#sql.fanOutTo.get(from, batch) as [bigint | null, bigint];
          if (to === null) return 0;
          if (this.#sql.fanOut.run({ from, to }).changes > 0) this.#log.wake();
          this.#sql.fannedOutTo.run(to);
          return Number(count);
        })
        .immediate(),
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

  #recordOne({ delivery, outcome, disableIfFailingSince }: AttemptResult): AttemptRecorded {
    const at = outcome.at.getTime();
    const status = statusAfter(outcome);
    const changed = this.#sql.record.run({
      status,
      at,
      next: status === 'pending' ? (outcome.nextAttemptAt as Date).getTime() : null,
      responseStatus: outcome.responseStatus ?? null,
      error: outcome.error ?? null,
      endpointId: delivery.endpointId,
      eventId: delivery.eventId,
      lease: delivery.leaseUntil.getTime(),
    }).changes;
    if (changed === 0) return { recorded: false };
    this.#sql.attempt.run({
      endpointId: delivery.endpointId,
      eventId: delivery.eventId,
      number: delivery.attempts + 1,
      startedAt: outcome.startedAt.getTime(),
      durationMs: outcome.durationMs,
      responseStatus: outcome.responseStatus ?? null,
      responseBody: outcome.responseBody ?? null,
      noAnswer: outcome.noAnswer ?? null,
      trigger: delivery.trigger,
    });
    if (outcome.succeeded) {
      this.#sql.succeeded.run({ at, endpointId: delivery.endpointId });
      return { recorded: true, disabled: undefined, failed: false };
    }
    const reason = disabledBy(
      outcome,
      date(this.#sql.failing.get(at, delivery.endpointId) ?? null),
      disableIfFailingSince,
    );
    if (!reason) return { recorded: true, disabled: undefined, failed: status === 'failed' };
    const disabled = this.#sql.disable.get(reason, delivery.endpointId);
    if (disabled) this.#log.append(endpointDisabled(toEndpoint(disabled), outcome.at));
    // Its pending deliveries end here: once enabled again, it gets the events that occur after.
    this.#sql.endPending.run({ endpointId: delivery.endpointId, at });
    return { recorded: true, disabled: disabled ? reason : undefined, failed: status === 'failed' };
  }

  async releaseLeases(deliveries: readonly ClaimedDelivery[]): Promise<void> {
    const now = Date.now();
    this.#relaxed(() =>
      this.#db.transaction(() => {
        for (const d of deliveries)
          this.#sql.release.run(now, d.endpointId, d.eventId, d.leaseUntil.getTime());
      })(),
    );
  }

  /** The earliest next_attempt_at of a pending delivery (a leased one's is its lease's end): one index lookup. */
  async nextDueAt(): Promise<Date | undefined> {
    const ms = this.#sql.nextDue.get();
    return ms === null || ms === undefined ? undefined : new Date(Number(ms));
  }

  async pending(): Promise<PendingDeliveries> {
    const row = this.#db
      // An event not fanned out yet is a delivery waiting too: the oldest of those counts for the age.
      .prepare<[], { n: bigint; oldest: bigint | null }>(
        `SELECT count(*) AS n, coalesce(min(min(e.occurred_at), (${FIRST_NOT_FANNED_OUT})),
             min(e.occurred_at), (${FIRST_NOT_FANNED_OUT})) AS oldest
         FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.status = 'pending'`,
      )
      .safeIntegers(true)
      .get() as { n: bigint; oldest: bigint | null };
    return { count: Number(row.n), oldestAt: date(row.oldest) };
  }

  async count(): Promise<number> {
    return this.#db.prepare<[], number>('SELECT count(*) FROM webhook_endpoints').pluck().get() as number;
  }

  async importEndpoints(endpoints: readonly WebhookEndpoint[]): Promise<number> {
    const insert = this.#db.prepare(
      `INSERT INTO webhook_endpoints (${ENDPOINT_COLUMNS}, deliver_after)
       VALUES (@id, @url, @types, @description, @rateLimit, @status, @disabledReason, @createdAt, @secret, @previousSecret,
         @previousSecretUntil, @lastSuccessAt, @failingSince, (SELECT coalesce(max(id), 0) FROM events))
       ON CONFLICT (id) DO NOTHING`,
    );
    return this.#db
      .transaction(() =>
        endpoints.reduce(
          (inserted, e) =>
            inserted +
            insert.run({
              id: e.id,
              url: e.url,
              types: typesText(e.types),
              description: e.description,
              rateLimit: e.rateLimit ?? null,
              status: e.status,
              disabledReason: e.disabledReason ?? null,
              createdAt: e.createdAt.getTime(),
              secret: e.secret,
              previousSecret: e.previousSecret ?? null,
              previousSecretUntil: e.previousSecretUntil?.getTime() ?? null,
              lastSuccessAt: e.lastSuccessAt?.getTime() ?? null,
              failingSince: e.failingSince?.getTime() ?? null,
            }).changes,
          0,
        ),
      )
      .immediate();
  }

  /** This process's events wake at once; another process's commits (an API process beside) within 100 ms. */
  watch(listener: () => void): () => void {
    const unwatch = this.#log.watch(listener);
    const unwatchOthers = watchOtherProcesses(this.#db, listener);
    return () => {
      unwatchOthers();
      unwatch();
    };
  }
}
