import type Database from 'better-sqlite3';
import type { EventType } from '../../domain/events.js';
import type { AttemptTrigger, DisabledReason, WebhookEndpointStatus } from '../../domain/webhooks.js';
import { ATTEMPT_COLUMNS } from '../attempt-row.js';
import { ENDPOINT_COLUMNS, type EndpointRow } from './endpoint-rows.js';

/*
 * Every statement the delivery queue (delivery-queue.ts) runs on SQLite, in one place: the API's
 * reads and a person's retry, prepared at each call as the endpoints' statements are; then the
 * statements the deliverer runs all the time (fan-out, claims, attempts recorded, leases released,
 * recoveries), prepared once (prepareDeliveryStatements).
 */

/** A rate-limited endpoint's token bucket (throttleAllows): null until its first claim. */
export interface ThrottleRow {
  throttle_tokens: number | null;
  throttle_at: bigint | null;
}

export const DELIVERY_COLUMNS =
  'endpoint_id, event_id, status, attempts, last_attempt_at, next_attempt_at, last_response_status, last_error';

/**
 * A page of an endpoint's deliveries, newest first (listDeliveries): `where` the filters given, each
 * on its own parameter.
 */
export const listDeliveriesText = (where: readonly string[]): string =>
  `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE ${where.join(' AND ')} ORDER BY event_id DESC LIMIT ?`;

/** Whether the endpoint has a delivery of the event (listAttempts: none, no list). */
export const DELIVERY_EXISTS = 'SELECT 1 FROM webhook_deliveries WHERE endpoint_id = ? AND event_id = ?';

/** A delivery's attempts after a position (listAttempts). */
export const LIST_ATTEMPTS = `SELECT ${ATTEMPT_COLUMNS}
         FROM webhook_attempts WHERE endpoint_id = ? AND event_id = ? AND number > ? ORDER BY number LIMIT ?`;

/** A delivery due again at once (@at now), its next attempt a `retry`. */
export const RETRY_DELIVERY = `UPDATE webhook_deliveries SET status = 'pending', next_trigger = 'retry',
           next_attempt_at = CASE WHEN lease_until > @at THEN next_attempt_at ELSE @at END
         WHERE endpoint_id = @endpointId AND event_id = @eventId RETURNING ${DELIVERY_COLUMNS}`;

/** When the first event the fan-out has not reached occurred, while any endpoint is enabled to want it. */
const FIRST_NOT_FANNED_OUT = `SELECT e.occurred_at FROM events e, webhook_fanout f
  WHERE e.id > f.last_event_id AND EXISTS (SELECT 1 FROM webhook_endpoints WHERE status = 'enabled')
  ORDER BY e.id LIMIT 1`;

/** Pending deliveries, and when the oldest one's event occurred: an event not fanned out yet counts too. */
export const PENDING = `SELECT count(*) AS n, coalesce(min(min(e.occurred_at), (${FIRST_NOT_FANNED_OUT})),
             min(e.occurred_at), (${FIRST_NOT_FANNED_OUT})) AS oldest
         FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.status = 'pending'`;

/** The SQL of each statement below, by name: what a test reads the query plans of. */
export const deliveryStatementTexts = (db: Database.Database): Record<string, string> =>
  Object.fromEntries(
    Object.entries(prepareDeliveryStatements(db)).map(([name, statement]) => [name, statement.source]),
  );

/** A recovery under way, with its endpoint's status (recoverNext). */
interface RecoveryRow {
  endpoint_id: bigint;
  status: WebhookEndpointStatus;
  since: bigint;
  until: bigint;
  after_event_id: bigint;
}

/**
 * The statements prepared once (prepareDeliveryStatements), by name: spelled out because an exported
 * function's type must be one a declaration file can name, and better-sqlite3's inferred one is not.
 */
export interface DeliveryStatements {
  leasedByEndpoint: Database.Statement<[string, number], [bigint, bigint, bigint]>;
  dueEndpoints: Database.Statement<[number], EndpointRow & ThrottleRow>;
  throttled: Database.Statement<[number, number, bigint]>;
  dueOfEndpoint: Database.Statement<
    [bigint, number, number],
    [bigint, bigint, EventType, bigint, string, string | null, AttemptTrigger]
  >;
  lease: Database.Statement<[{ until: number; owner: string; endpointId: bigint; eventId: bigint }]>;
  record: Database.Statement;
  attempt: Database.Statement;
  succeeded: Database.Statement<[{ at: number; endpointId: bigint }]>;
  failing: Database.Statement<[number, bigint], bigint>;
  disable: Database.Statement<[DisabledReason, bigint], EndpointRow>;
  endPending: Database.Statement;
  release: Database.Statement<[number, bigint, bigint, number]>;
  fanOutFrom: Database.Statement<[], bigint>;
  fanOutTo: Database.Statement<[bigint, number], [bigint | null, bigint]>;
  fanOut: Database.Statement<{ from: bigint; to: bigint }>;
  fannedOutTo: Database.Statement<[bigint]>;
  anyEnabled: Database.Statement<[], number>;
  skipFanOut: Database.Statement;
  anyRecovery: Database.Statement<[], number>;
  endpointStatus: Database.Statement<[bigint], WebhookEndpointStatus>;
  recoveryOf: Database.Statement<[bigint], number>;
  failedInWindow: Database.Statement<[bigint, number, number], number>;
  recoveryStarted: Database.Statement<[bigint, number, number, number]>;
  recoveries: Database.Statement<[], RecoveryRow>;
  recoverable: Database.Statement<[bigint, bigint, bigint, bigint, number], bigint>;
  recovered: Database.Statement<[{ at: number; endpointId: bigint; eventId: bigint }]>;
  recoveredTo: Database.Statement<[bigint, bigint]>;
  recovering: Database.Statement<[bigint], number>;
  recoveryDone: Database.Statement<[bigint]>;
  nextDue: Database.Statement<[], bigint | null>;
}

/**
 * The statements the deliverer runs all the time, prepared once: on every claim, attempt and wake-up.
 * Each is an index search, whatever the backlog.
 */
export function prepareDeliveryStatements(db: Database.Database): DeliveryStatements {
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
      .prepare<[], RecoveryRow>(
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
