import type pg from 'pg';
import { IdempotencyKeyReusedError } from '../../domain/errors.js';
import { type EventType, eventJson, type NewEvent } from '../../domain/events.js';
import type { IdempotencyClaim } from '../../domain/storage.js';
import type {
  AttemptOutcome,
  AttemptRecorded,
  AttemptTrigger,
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
  WebhookEndpointStatus,
} from '../../domain/webhooks.js';
import {
  disabledBy,
  endpointDisabled,
  RECORD_LINGER_MS,
  signingSecrets,
  statusAfter,
} from '../../domain/webhooks.js';
import { type AttemptRow, toAttempt } from '../attempt-row.js';
import { CreateBatcher } from '../create-batcher.js';
import { RecoveryRefused } from '../recovery-refused.js';
import {
  BEGIN_RELAXED,
  CLAIM,
  DISABLE_ENDPOINT,
  END_PENDING,
  FAN_OUT,
  LIST_ATTEMPTS,
  listDeliveriesText,
  PENDING,
  RECORD_ATTEMPT,
  RECORD_SUCCEEDED,
  RECOVER_STEP,
  RECOVERIES,
  RECOVERY_ENDPOINT,
  RELEASE_LEASES,
  RETRY_DELIVERY,
  START_RECOVERY,
} from './delivery-statements.js';
import { type EndpointRow, toEndpoint } from './endpoint-rows.js';
import { appendEvents, WEBHOOKS_CHANNEL } from './events.js';
import type { PostgresIdempotencyKeys } from './idempotency.js';
import type { PostgresNotifications } from './notifications.js';
import { inTransaction, type ReadPool } from './transaction.js';

interface AttemptResult {
  delivery: ClaimedDelivery;
  outcome: AttemptOutcome;
  disableIfFailingSince: Date;
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

/** A delivery a claim leased, as CLAIM's JSON has it: event id, attempts, trigger, type, occurred, data, cause. */
type ClaimedJson = [string, number, AttemptTrigger, EventType, string, string, string | null];

/** An endpoint a claim leased from: id, URL, secret, previous secret and until when, its deliveries. */
type ClaimedEndpointJson = [string, string, string, string | null, string | null, ClaimedJson[]];

/** A claim's one row (CLAIM). */
interface ClaimRow {
  next_due: Date | null;
  throttled_until: Date | null;
  endpoints: ClaimedEndpointJson[] | null;
}

/** The deliveries leased from one endpoint, ready to attempt. */
function claimedOf(
  [id, url, secret, previous, previousUntil, deliveries]: ClaimedEndpointJson,
  now: Date,
  leaseUntil: Date,
): ClaimedDelivery[] {
  const endpointId = BigInt(id);
  const secrets = signingSecrets(
    secret,
    previous ?? undefined,
    previousUntil === null ? undefined : new Date(previousUntil),
    now,
  );
  return deliveries.map(([eventId, attempts, trigger, type, occurred, data, cause]) => {
    const id = BigInt(eventId);
    const occurredAt = new Date(occurred);
    return {
      endpointId,
      eventId: id,
      attempts,
      trigger,
      url,
      secrets,
      body: eventJson({ id, type, occurredAt, data }),
      eventType: type,
      cause: cause ?? undefined,
      occurredAt,
      leaseUntil,
    };
  });
}

/**
 * Webhook deliveries on PostgreSQL, for any number of nodes; every statement it runs is in
 * delivery-statements.ts. A claim locks the endpoints it leases from and skips those another claimer
 * holds (CLAIM): no two lease one delivery, and the per-endpoint bound and throttle are
 * exact; a commit that adds deliveries NOTIFYs every node (events.ts), which LISTENs here.
 */
export class PostgresDeliveryQueue implements DeliveryQueue {
  readonly #pool: pg.Pool;
  readonly #notifications: PostgresNotifications;
  /** recover's Idempotency-Key records. */
  readonly #idempotency: PostgresIdempotencyKeys;
  readonly #results = new CreateBatcher<AttemptResult, AttemptRecorded>(
    (results) => this.#recordAll(results),
    {
      name: 'deliveries.recordAttempt',
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
      listDeliveriesText(where, `$${values.push(limit)}`),
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
      text: LIST_ATTEMPTS,
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
          RECOVERY_ENDPOINT,
          [endpointId],
        );
        const endpoint = rows[0];
        // Refused: the key's claim goes with the rolled-back transaction, so a later request may use it.
        if (!endpoint) throw new RecoveryRefused({ outcome: 'not_found' });
        if (endpoint.status === 'disabled') throw new RecoveryRefused({ outcome: 'disabled' });
        if (endpoint.running) throw new RecoveryRefused({ outcome: 'running' });
        const { rows: counted } = await client.query<{ queued: number }>(START_RECOVERY, [
          endpointId,
          window.since,
          window.until,
          at,
        ]);
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
   * Each recovery moves on by one statement (RECOVER_STEP), which takes its row SKIP LOCKED: one node
   * moves a recovery's batch, the others move nothing of it.
   */
  async recoverNext(now: Date, batch: number): Promise<number> {
    const { rows: recoveries } = await this.#pool.query<{ endpoint_id: bigint }>({
      name: 'webhooks_recoveries',
      text: RECOVERIES,
    });
    let moved = 0;
    for (const { endpoint_id } of recoveries) {
      const { rows } = await this.#pool.query<{ moved: number }>({
        name: 'webhooks_recover_step',
        text: RECOVER_STEP,
        values: [endpoint_id, batch, now],
      });
      moved += rows[0]?.moved ?? 0;
    }
    return moved;
  }

  async retryDelivery(endpointId: bigint, eventId: bigint, at: Date): Promise<WebhookDelivery | undefined> {
    const { rows } = await this.#pool.query<DeliveryRow>(RETRY_DELIVERY, [endpointId, eventId, at]);
    return rows[0] && toDelivery(rows[0]);
  }

  /**
   * Endpoint by endpoint (each bounded by what every node has leased already), the deliveries due first,
   * through the (endpoint_id, next_attempt_at) index: a backlog on one endpoint costs the others
   * nothing. A leased delivery is due again when its lease ends: a node that dies lets it go. One
   * statement (CLAIM).
   */
  async claimDue(now: Date, leaseUntil: Date, limits: ClaimLimits): Promise<Claim> {
    const { limit, perEndpoint, owner, depths } = limits;
    const { rows } = await this.#pool.query<ClaimRow>({
      // Unnamed: planned at each claim, for the table as it is then (see CLAIM).
      text: CLAIM,
      values: [now, owner, leaseUntil, limit, perEndpoint, [...depths.keys()], [...depths.values()]],
    });
    const row = rows[0];
    return {
      deliveries: row?.endpoints?.flatMap((endpoint) => claimedOf(endpoint, now, leaseUntil)) ?? [],
      throttledUntil: row?.throttled_until ?? undefined,
      nextDueAt: row?.next_due ?? undefined,
    };
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
    const batch = results.map(({ delivery, outcome }) => ({
      endpoint_id: String(delivery.endpointId),
      event_id: String(delivery.eventId),
      lease_until_ms: delivery.leaseUntil.getTime(),
      at_ms: outcome.at.getTime(),
      response_status: outcome.responseStatus ?? null,
      started_at_ms: outcome.startedAt.getTime(),
      duration_ms: outcome.durationMs,
      response_body: outcome.responseBody ?? null,
      trigger: delivery.trigger,
    }));
    const { rows } = await this.#pool.query<{ endpoint_id: bigint; event_id: bigint }>({
      name: 'webhooks_record_succeeded',
      text: RECORD_SUCCEEDED,
      values: [JSON.stringify(batch)],
    });
    // A lease that ran out and was taken again by another attempt: that one records instead.
    const passedOn = new Set(rows.map((row) => `${row.endpoint_id}/${row.event_id}`));
    return results.map(
      ({ delivery }): AttemptRecorded =>
        passedOn.has(`${delivery.endpointId}/${delivery.eventId}`)
          ? { recorded: false }
          : { recorded: true, disabled: undefined, failed: false },
    );
  }

  async #recordOne(
    client: pg.PoolClient,
    { delivery, outcome, disableIfFailingSince }: AttemptResult,
    events: NewEvent[],
  ): Promise<AttemptRecorded> {
    const status = statusAfter(outcome);
    const { rows } = await client.query<{ recorded: boolean; failing_since: Date | null }>({
      name: 'webhooks_record',
      text: RECORD_ATTEMPT,
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
        outcome.succeeded,
      ],
    });
    if (!rows[0]?.recorded) return { recorded: false };
    if (outcome.succeeded) return { recorded: true, disabled: undefined, failed: false };
    const reason = disabledBy(outcome, rows[0]?.failing_since ?? undefined, disableIfFailingSince);
    if (!reason) return { recorded: true, disabled: undefined, failed: status === 'failed' };
    // Only the update that finds it enabled disables it (and records the event): once, whoever races.
    const { rows: disabled } = await client.query<EndpointRow>(DISABLE_ENDPOINT, [
      reason,
      delivery.endpointId,
    ]);
    for (const row of disabled) events.push(endpointDisabled(toEndpoint(row), outcome.at));
    // Its pending deliveries end here: once enabled again, it gets the events that occur after.
    await client.query(END_PENDING, [delivery.endpointId, outcome.at]);
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
    await this.#pool.query(RELEASE_LEASES, [
      deliveries.map((d) => d.endpointId),
      deliveries.map((d) => d.eventId),
      deliveries.map((d) => d.leaseUntil),
    ]);
  }

  async pending(): Promise<PendingDeliveries> {
    // An event not fanned out yet is a delivery waiting too: the oldest of those counts for the age.
    const { rows } = await this.#pool.query<{ n: bigint; oldest: Date | null }>(PENDING);
    return { count: Number(rows[0]?.n ?? 0n), oldestAt: rows[0]?.oldest ?? undefined };
  }

  /** Woken by the node's one LISTEN connection (notifications.ts). */
  watch(listener: () => void): () => void {
    return this.#notifications.watch(WEBHOOKS_CHANNEL, listener);
  }
}
