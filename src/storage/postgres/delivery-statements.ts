import { ATTEMPT_COLUMNS } from '../attempt-row.js';
import { ENDPOINT_COLUMNS } from './endpoint-rows.js';
import { WEBHOOKS_CHANNEL } from './events.js';

/*
 * Every statement the delivery queue (delivery-queue.ts) runs on PostgreSQL, here rather than in its
 * methods, so that one file shows all it does to the deliveries: the API's reads, the fan-out, claims,
 * attempts recorded, leases released, retries and recoveries. A statement's prepared name, where it
 * has one, stays at its call.
 */

/**
 * Delivery bookkeeping made in a transaction (claims, failed attempts) commits without waiting for the
 * write-ahead log to be flushed: a server crash could lose the last of it, and the worst that costs is
 * an attempt made again, which at-least-once delivery allows. Changes and their events keep
 * synchronous_commit on.
 */
export const BEGIN_RELAXED = 'BEGIN; SET LOCAL synchronous_commit = off';

const DELIVERY_COLUMNS =
  'endpoint_id, event_id, status, attempts, last_attempt_at, next_attempt_at, last_response_status, last_error';

/**
 * A page of an endpoint's deliveries, newest first (listDeliveries): `where` the filters given, each on
 * its own parameter, so each is an index condition (`($n IS NULL OR status = $n)` is none); `limit` the
 * limit's parameter.
 */
export const listDeliveriesText = (where: readonly string[], limit: string): string =>
  `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE ${where.join(' AND ')}
       ORDER BY event_id DESC LIMIT ${limit}`;

/** A delivery's attempts after a position, and whether the delivery exists: one round trip (listAttempts). */
export const LIST_ATTEMPTS = `SELECT (SELECT coalesce(json_agg(a ORDER BY a.number), '[]') FROM (
                 SELECT ${ATTEMPT_COLUMNS}
                 FROM webhook_attempts WHERE endpoint_id = $1 AND event_id = $2 AND number > $3
                 ORDER BY number LIMIT $4) a) AS attempts
             FROM webhook_deliveries WHERE endpoint_id = $1 AND event_id = $2`;

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

/**
 * A claim, in one statement: one round trip, and its locks held only while it runs. $1 now, $2 this
 * process (the leases' owner), $3 the leases' end, $4 the claim's room, $5 WEBHOOK_CONCURRENCY_PER_ENDPOINT,
 * $6/$7 the endpoints this process leases deeper than that, and how deep (EndpointQueues.depths).
 * - `endpoints`: those enabled with a delivery due, the one whose oldest due delivery has waited longest
 *   first (so a busy endpoint never keeps a quiet one waiting for the claim's room), with the live leases
 *   on each (`others`: another process's). Each row is locked and skipped by any other claimer (SKIP
 *   LOCKED): claims of different endpoints run side by side on any nodes, and an endpoint's leases are
 *   counted and taken by one claimer at a time, so the per-endpoint bound and the throttle hold across
 *   nodes.
 * - `shares`: how many of each: its bound less its live leases (the domain's `claimable`), no more than
 *   its throttle's whole tokens (the domain's token bucket, `burst` = `rateLimit`, refilled since
 *   `throttle_at`), within what the endpoints before it left of the room.
 * - `picked`, `leased`: each endpoint's deliveries due first, then in event order, found through the
 *   (endpoint_id, next_attempt_at) index and leased by their row addresses (a TID scan); a row changed
 *   since (a retry asked for, the endpoint disabled) is at another address by then, and is left out.
 * - `buckets`, `throttled`: the throttled endpoints' buckets, less what was leased from each. A bucket's
 *   time never moves back: a claim whose `now` is older than the last one's (read on another node, a
 *   moment before that one ran) refills nothing, and moving the time back would refill that moment twice.
 * - `later`: when to look again: the earliest delivery left pending (a leased one is due when its lease
 *   ends), and the earliest next token of a bucket left empty.
 * One row: `later`'s columns, and what was leased as one JSON value (`endpoints`: per endpoint, its id,
 * URL and secrets, then its deliveries in event order; null when none): the client parses one field,
 * where a row per delivery made it parse and convert fourteen (about a third of a claim's client CPU).
 * Ids are strings in it (int64 is beyond a JSON number's exact range), instants PostgreSQL's ISO text.
 * Sent unnamed, so planned at each claim for the table's size then: a named statement keeps the plan
 * made at its first uses, and one made while the table held a few rows read every delivery of the
 * endpoint for each one leased (as a join: 40 ms a claim at 30,000 pending), or all of them once (a
 * sequential scan, 10 ms and growing). Planning it costs about 0.1 ms, once a round. Committed without
 * waiting for the log's flush (`set_config(…, true)` is SET LOCAL, for this statement's transaction):
 * see BEGIN_RELAXED.
 */
export const CLAIM = `WITH relaxed AS (
    SELECT set_config('synchronous_commit', 'off', true)
  ), endpoints AS (
    SELECT w.id, w.url, w.secret, w.previous_secret, w.previous_secret_until, w.rate_limit, w.throttle_tokens,
      w.throttle_at, oldest.due, l.leased, l.others
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
    FOR UPDATE OF w SKIP LOCKED
  ), sized AS (
    SELECT e.*, b.tokens,
      least(greatest(0, CASE WHEN e.others > 0 THEN $5 ELSE greatest($5, coalesce(k.depth, $5)) END - e.leased),
        coalesce(floor(b.tokens)::int, $4)) AS wanted
    FROM endpoints e
    LEFT JOIN unnest($6::bigint[], $7::int[]) AS k(id, depth) ON k.id = e.id
    CROSS JOIN LATERAL (SELECT CASE
        WHEN e.rate_limit IS NULL THEN NULL
        WHEN e.throttle_tokens IS NULL OR e.throttle_at IS NULL THEN e.rate_limit::float8
        ELSE least(e.rate_limit::float8,
          e.throttle_tokens + greatest(0, extract(epoch FROM $1 - e.throttle_at)::float8) * e.rate_limit)
      END AS tokens) b
  ), shares AS (
    SELECT s.*, greatest(0, least(s.wanted, $4 - coalesce(sum(s.wanted) OVER (ORDER BY s.due, s.id
      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)))::int AS n
    FROM sized s
  ), picked AS (
    SELECT ARRAY(
      SELECT due.ctid FROM shares CROSS JOIN LATERAL (
        SELECT ctid FROM webhook_deliveries
        WHERE endpoint_id = shares.id AND status = 'pending' AND next_attempt_at <= $1
        ORDER BY next_attempt_at, event_id LIMIT shares.n) due
      WHERE shares.n > 0) AS ctids
  ), leased AS (
    UPDATE webhook_deliveries d SET lease_until = $3, next_attempt_at = $3, lease_owner = $2
    WHERE d.ctid = ANY ((SELECT ctids FROM picked)::tid[])
    RETURNING d.endpoint_id, d.event_id, d.attempts, d.next_trigger
  ), buckets AS (
    SELECT s.id, s.rate_limit, s.tokens - count(l.event_id) AS tokens, count(l.event_id) AS taken,
      greatest(s.throttle_at, $1) AS at
    FROM shares s LEFT JOIN leased l ON l.endpoint_id = s.id
    WHERE s.rate_limit IS NOT NULL GROUP BY s.id, s.rate_limit, s.tokens, s.throttle_at
  ), throttled AS (
    UPDATE webhook_endpoints w SET throttle_tokens = b.tokens, throttle_at = b.at
    FROM buckets b WHERE w.id = b.id AND b.taken > 0
  ), later AS (
    SELECT least(
        (SELECT next_attempt_at FROM webhook_deliveries
         WHERE status = 'pending' AND NOT (ctid = ANY ((SELECT ctids FROM picked)::tid[]))
         ORDER BY next_attempt_at LIMIT 1),
        CASE WHEN EXISTS (SELECT 1 FROM leased) THEN $3::timestamptz END) AS next_due,
      (SELECT min(b.at + make_interval(secs => (1 - b.tokens) / b.rate_limit)) FROM buckets b WHERE b.tokens < 1)
        AS throttled_until
  )
  SELECT later.next_due, later.throttled_until, (
      SELECT json_agg(json_build_array(s.id::text, s.url, s.secret, s.previous_secret, s.previous_secret_until,
          g.deliveries) ORDER BY s.id)
      FROM (
        SELECT l.endpoint_id, json_agg(json_build_array(l.event_id::text, l.attempts, l.next_trigger, e.type,
            e.occurred_at, e.data, e.trace_context) ORDER BY l.event_id) AS deliveries
        FROM leased l JOIN events e ON e.id = l.event_id GROUP BY l.endpoint_id) g
      JOIN shares s ON s.id = g.endpoint_id) AS endpoints
  FROM relaxed CROSS JOIN later`;

/**
 * The attempts of a batch that all answered 2xx (recordAttempt's common case), in one statement: their
 * deliveries succeed and their endpoints' failing spells end, all under the leases they were made with.
 * The batch is one JSON parameter (an array of objects, ids as strings, instants as milliseconds
 * since the epoch): one JSON.stringify in the client, where nine array parameters had node-postgres
 * format and escape every element (an instant as ISO text cost 0.8 µs more than as a number, three of
 * them a delivery). to_timestamp is exact to the microsecond, so a lease compares equal to the one the
 * claim wrote. Answers with the attempts whose lease had passed on (nearly always none), not with every
 * one recorded.
 */
export const RECORD_SUCCEEDED = `WITH batch AS (
               SELECT r.endpoint_id, r.event_id, to_timestamp(r.lease_until_ms / 1000) AS lease_until,
                 to_timestamp(r.at_ms / 1000) AS at, r.response_status,
                 to_timestamp(r.started_at_ms / 1000) AS started_at, r.duration_ms, r.response_body, r.trigger
               FROM json_to_recordset($1::json) AS r(endpoint_id bigint, event_id bigint, lease_until_ms float8,
                 at_ms float8, response_status int, started_at_ms float8, duration_ms int, response_body text,
                 trigger text)
             ), done AS (
               UPDATE webhook_deliveries d SET status = 'succeeded', attempts = d.attempts + 1,
                 last_attempt_at = r.at, next_attempt_at = NULL, last_response_status = r.response_status,
                 last_error = NULL, lease_until = NULL, next_trigger = 'schedule'
               FROM batch r
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
             SELECT endpoint_id, event_id FROM batch
             WHERE (endpoint_id, event_id) NOT IN (SELECT endpoint_id, event_id FROM done)`;

/**
 * One attempt recorded under its lease, kept in the attempts' list, and its endpoint's failing spell
 * moved: a success ends it (and notes the success, written only when that changes something or at most
 * once a second), a failure starts it unless one is under way. Nothing when the lease passed on.
 * Answers whether it recorded, and since when the endpoint has been failing (null: not failing), for
 * the domain to decide whether that disables it (disabledBy). $14: whether the attempt succeeded.
 */
export const RECORD_ATTEMPT = `WITH recorded AS (
               UPDATE webhook_deliveries SET status = $1, attempts = attempts + 1, last_attempt_at = $2,
                 next_attempt_at = $3, last_response_status = $4, last_error = $5, lease_until = NULL,
                 next_trigger = 'schedule'
               WHERE endpoint_id = $6 AND event_id = $7 AND lease_until = $8
               RETURNING attempts
             ), kept AS (
               INSERT INTO webhook_attempts (endpoint_id, event_id, number, started_at, duration_ms,
                 response_status, response_body, error, trigger)
               SELECT $6, $7, attempts, $9::timestamptz, $10::int, $4, $11::text, $12::text, $13::text FROM recorded
             ), spell AS (
               UPDATE webhook_endpoints
               SET failing_since = CASE WHEN $14 THEN NULL ELSE coalesce(failing_since, $2) END,
                 last_success_at = CASE WHEN $14 THEN $2 ELSE last_success_at END
               WHERE id = $6 AND EXISTS (SELECT 1 FROM recorded)
                 AND (NOT $14 OR failing_since IS NOT NULL OR last_success_at IS NULL
                   OR last_success_at < $2::timestamptz - interval '1 second')
               RETURNING failing_since
             )
             SELECT EXISTS (SELECT 1 FROM recorded) AS recorded, (SELECT failing_since FROM spell) AS failing_since`;

/** Disables the endpoint only while it is enabled: the one update that finds it so records the event. */
export const DISABLE_ENDPOINT = `UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = $1 WHERE id = $2 AND status = 'enabled'
       RETURNING ${ENDPOINT_COLUMNS}`;

/** A disabled endpoint's pending deliveries end, those leased to an attempt under way left to it. */
export const END_PENDING = `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL,
         last_error = coalesce(last_error, 'the endpoint was disabled')
       WHERE endpoint_id = $1 AND status = 'pending' AND (lease_until IS NULL OR lease_until <= $2)`;

/** Leases given back (a stopping node): due again at once, each only under the lease it was given with. */
export const RELEASE_LEASES = `UPDATE webhook_deliveries SET lease_until = NULL, next_attempt_at = now()
       FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[]) AS c(endpoint_id, event_id, lease_until)
       WHERE webhook_deliveries.endpoint_id = c.endpoint_id AND webhook_deliveries.event_id = c.event_id
         AND webhook_deliveries.lease_until = c.lease_until`;

/** Pending deliveries, and the age of the oldest: an event not fanned out yet counts too. */
export const PENDING = `SELECT count(*) AS n, least(min(e.occurred_at), (
           SELECT e.occurred_at FROM events e, webhook_fanout f
           WHERE e.id > f.last_event_id AND EXISTS (SELECT 1 FROM webhook_endpoints WHERE status = 'enabled')
           ORDER BY e.id LIMIT 1)) AS oldest
       FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.status = 'pending'`;

/** A delivery due again at once ($3 now), its next attempt a `retry`; NOTIFY wakes every node's deliverer. */
export const RETRY_DELIVERY = `WITH retried AS (
         -- An attempt under way (leased) keeps its lease: no second attempt beside it.
         UPDATE webhook_deliveries SET status = 'pending', next_trigger = 'retry',
           next_attempt_at = CASE WHEN lease_until > $3 THEN next_attempt_at ELSE $3 END
         WHERE endpoint_id = $1 AND event_id = $2 RETURNING ${DELIVERY_COLUMNS}
       ) SELECT retried.*, pg_notify('${WEBHOOKS_CHANNEL}', current_schema()) FROM retried`;

/** Whether a recovery may start: the endpoint's status and whether one runs, its row locked for the start. */
export const RECOVERY_ENDPOINT = `SELECT status, EXISTS (SELECT 1 FROM webhook_recoveries WHERE endpoint_id = $1) AS running
           FROM webhook_endpoints WHERE id = $1 FOR UPDATE`;

/**
 * Counts the failed deliveries in the window and, when there are any, records the recovery (with its
 * cursor before every event) and wakes every node's deliverer.
 */
export const START_RECOVERY = `WITH counted AS (
             SELECT count(*)::int AS queued FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
             WHERE d.endpoint_id = $1 AND d.status = 'failed' AND e.occurred_at >= $2 AND e.occurred_at < $3
           ), started AS (
             INSERT INTO webhook_recoveries (endpoint_id, since, until, after_event_id, created_at)
             SELECT $1, $2, $3, 0, $4 FROM counted WHERE queued > 0
             RETURNING pg_notify('${WEBHOOKS_CHANNEL}', current_schema())
           )
           SELECT queued, (SELECT count(*) FROM started) AS started FROM counted`;

/** The endpoints with a recovery under way: a read (nearly always none), each then moved on by RECOVER_STEP. */
export const RECOVERIES = 'SELECT endpoint_id FROM webhook_recoveries ORDER BY endpoint_id';

/**
 * One step of an endpoint's recovery ($1), in one statement: its row taken SKIP LOCKED (one node moves a
 * recovery at a time; another finds nothing and moves nothing); its next batch ($2 at most) of failed
 * deliveries after its cursor, for events in its window, moved back to pending in event order, due at
 * $3 (only while the endpoint is enabled); its cursor moved past them; or, with none left to move and
 * none it queued still waiting for its attempt (or the endpoint disabled), the recovery over. Answers
 * how many it moved; NOTIFY wakes every node's deliverer. Committed without waiting for the log's flush
 * (see BEGIN_RELAXED).
 */
export const RECOVER_STEP = `WITH relaxed AS (
    SELECT set_config('synchronous_commit', 'off', true)
  ), recovery AS (
    SELECT r.since, r.until, r.after_event_id, w.status = 'enabled' AS enabled
    FROM webhook_recoveries r JOIN webhook_endpoints w ON w.id = r.endpoint_id
    WHERE r.endpoint_id = $1
    FOR UPDATE OF r SKIP LOCKED
  ), batch AS (
    SELECT d.event_id FROM recovery r
    JOIN webhook_deliveries d ON d.endpoint_id = $1 AND d.status = 'failed' AND d.event_id > r.after_event_id
    JOIN events e ON e.id = d.event_id AND e.occurred_at >= r.since AND e.occurred_at < r.until
    WHERE r.enabled
    ORDER BY d.event_id LIMIT $2
  ), moved AS (
    UPDATE webhook_deliveries d SET status = 'pending', next_trigger = 'recover', next_attempt_at = $3,
      lease_until = NULL
    FROM batch WHERE d.endpoint_id = $1 AND d.event_id = batch.event_id
    RETURNING d.event_id
  ), cursor_moved AS (
    UPDATE webhook_recoveries SET after_event_id = (SELECT max(event_id) FROM moved)
    WHERE endpoint_id = $1 AND EXISTS (SELECT 1 FROM recovery) AND EXISTS (SELECT 1 FROM moved)
  ), ended AS (
    DELETE FROM webhook_recoveries
    WHERE endpoint_id = $1 AND EXISTS (SELECT 1 FROM recovery) AND NOT EXISTS (SELECT 1 FROM moved)
      AND (NOT (SELECT enabled FROM recovery) OR NOT EXISTS (
        SELECT 1 FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending' AND next_trigger = 'recover'))
  )
  SELECT (SELECT count(*)::int FROM moved) AS moved,
    CASE WHEN EXISTS (SELECT 1 FROM moved) THEN pg_notify('${WEBHOOKS_CHANNEL}', current_schema()) END
  FROM relaxed`;
