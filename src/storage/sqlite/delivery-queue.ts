import type Database from 'better-sqlite3';
import { IdempotencyKeyReusedError } from '../../domain/errors.js';
import { eventJson } from '../../domain/events.js';
import type { IdempotencyClaim } from '../../domain/storage.js';
import type { BucketState } from '../../domain/token-bucket.js';
import type {
  AttemptOutcome,
  AttemptRecorded,
  Claim,
  ClaimedDelivery,
  ClaimLimits,
  DeliveryListQuery,
  DeliveryQueue,
  PendingDeliveries,
  RecoveryStart,
  RecoveryWindow,
  WebhookAttempt,
  WebhookDelivery,
  WebhookDeliveryStatus,
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
import { type AttemptRow, toAttempt } from '../attempt-row.js';
import { CreateBatcher } from '../create-batcher.js';
import { RecoveryRefused } from '../recovery-refused.js';
import {
  DELIVERY_EXISTS,
  type DeliveryStatements,
  LIST_ATTEMPTS,
  listDeliveriesText,
  PENDING,
  prepareDeliveryStatements,
  RETRY_DELIVERY,
  type ThrottleRow,
} from './delivery-statements.js';
import { date, type EndpointRow, toEndpoint } from './endpoint-rows.js';
import { type SqliteEventLog, watchOtherProcesses } from './events.js';
import type { SqliteIdempotencyKeys } from './idempotency.js';

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

const bucketOf = (row: ThrottleRow): BucketState | undefined =>
  row.throttle_tokens === null || row.throttle_at === null
    ? undefined
    : { tokens: row.throttle_tokens, atMs: Number(row.throttle_at) };

interface AttemptResult {
  delivery: ClaimedDelivery;
  outcome: AttemptOutcome;
  disableIfFailingSince: Date;
}

/**
 * Webhook deliveries on SQLite, instants in epoch milliseconds; every statement it runs is in
 * delivery-statements.ts. Claiming runs in an IMMEDIATE transaction: one writer at a time, across
 * processes on the file, so no two claim one delivery and the per-endpoint bound counts every
 * process's leases.
 */
export class SqliteDeliveryQueue implements DeliveryQueue {
  readonly #db: Database.Database;
  /** Prepared once: `db.pragma()` prepares its statement at each call, twice a round and a batch. */
  readonly #synchronous: { normal: Database.Statement; full: Database.Statement };
  readonly #log: SqliteEventLog;
  /** recover's Idempotency-Key records. */
  readonly #idempotency: SqliteIdempotencyKeys;

  readonly #sql: DeliveryStatements;
  readonly #claimAll: Database.Transaction<(at: number, until: number, limits: ClaimLimits) => Claim>;
  readonly #results: CreateBatcher<AttemptResult, AttemptRecorded>;

  constructor(db: Database.Database, log: SqliteEventLog, idempotency: SqliteIdempotencyKeys) {
    this.#synchronous = {
      normal: db.prepare('PRAGMA synchronous = NORMAL'),
      full: db.prepare('PRAGMA synchronous = FULL'),
    };
    this.#db = db;
    this.#log = log;
    this.#idempotency = idempotency;
    this.#sql = prepareDeliveryStatements(db);
    this.#claimAll = db.transaction((at: number, until: number, limits: ClaimLimits) =>
      this.#claim(at, until, limits),
    );
    const recordAll = db.transaction((results: readonly AttemptResult[]) => {
      // Every attempt answered 2xx (the common case): each endpoint's failing spell ends once, with its
      // latest success, instead of an update per attempt. Otherwise in order: a failure after a success
      // starts a spell the success must not end.
      const allSucceeded = results.every(({ outcome }) => outcome.succeeded);
      const latest = new Map<bigint, number>();
      const recorded = results.map((result) => this.#recordOne(result, allSucceeded ? latest : undefined));
      for (const [endpointId, at] of latest) this.#sql.succeeded.run({ at, endpointId });
      return recorded;
    });
    this.#results = new CreateBatcher((results) => this.#relaxed(() => recordAll.immediate(results)), {
      name: 'deliveries.recordAttempt',
      lingerMs: RECORD_LINGER_MS,
    });
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
      .prepare<unknown[], DeliveryRow>(listDeliveriesText(where))
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
      .prepare<[bigint, bigint], number>(DELIVERY_EXISTS)
      .pluck()
      .get(endpointId, eventId);
    if (exists === undefined) return undefined;
    return this.#db
      .prepare<[bigint, bigint, number, number], AttemptRow>(LIST_ATTEMPTS)
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
        RETRY_DELIVERY,
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
    this.#synchronous.normal.run();
    try {
      return work();
    } finally {
      this.#synchronous.full.run();
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
    const due = this.#sql.nextDue.get();
    return {
      deliveries: claimed,
      throttledUntil,
      nextDueAt: due === null || due === undefined ? undefined : new Date(Number(due)),
    };
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

  /** `successes`: where a success notes its endpoint's latest, for the caller to write once a batch. */
  #recordOne(
    { delivery, outcome, disableIfFailingSince }: AttemptResult,
    successes?: Map<bigint, number>,
  ): AttemptRecorded {
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
      if (successes)
        successes.set(delivery.endpointId, Math.max(at, successes.get(delivery.endpointId) ?? at));
      else this.#sql.succeeded.run({ at, endpointId: delivery.endpointId });
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

  async pending(): Promise<PendingDeliveries> {
    const row = this.#db
      // An event not fanned out yet is a delivery waiting too: the oldest of those counts for the age.
      .prepare<[], { n: bigint; oldest: bigint | null }>(PENDING)
      .safeIntegers(true)
      .get() as { n: bigint; oldest: bigint | null };
    return { count: Number(row.n), oldestAt: date(row.oldest) };
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
