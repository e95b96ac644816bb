import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { attemptOutcome } from '../domain/attempt-outcome.js';
import { StorageUnavailableError } from '../domain/errors.js';
import { type ClaimedDelivery, type DeliveryQueue, RECOVER_BATCH } from '../domain/webhooks.js';
import { type EndpointQueue, EndpointQueues } from './endpoint-queues.js';
import type { SendResult, WebhookSender } from './sender.js';
import { webhookHeaders } from './signature.js';

export interface DelivererLog {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
}

export interface DelivererMetrics {
  attempted(outcome: 'succeeded' | 'retrying' | 'failed', seconds: number): void;
  disabled(reason: string): void;
  /** A 2xx arrived this long after its event occurred. */
  delivered(lagSeconds: number): void;
}

/** Runs one attempt inside a trace span; `send` gets the headers that carry it (traceparent). */
export interface DeliveryTracer {
  attempt(
    delivery: ClaimedDelivery,
    send: (headers: Record<string, string>) => Promise<SendResult>,
  ): Promise<SendResult>;
}

export interface DelivererOptions {
  store: DeliveryQueue;
  sender: WebhookSender;
  /** Delays between attempts (WEBHOOK_RETRY_SCHEDULE), in milliseconds. */
  schedule: readonly number[];
  timeoutMs: number;
  disableAfterMs: number;
  concurrencyPerEndpoint: number;
  now: () => Date;
  log: DelivererLog;
  metrics?: DelivererMetrics | undefined;
  /** When tracing is on: each attempt is a span (tracing/delivery-spans.ts). */
  tracer?: DeliveryTracer | undefined;
  random?: () => number;
}

/**
 * Fanning out: events given their deliveries per transaction. With a hundred endpoints an event is a
 * hundred rows; a batch of 100 events is at most 10,000 rows, a few milliseconds of SQLite's one
 * writer, between which creates take it. Not paced beyond the rounds' MIN_ROUND_MS: on a delivery
 * thread, pacing by a fan-out's wall time (which counts its waits for the writer) held deliveries to
 * fewer than creates at half a node's rate on SQLite (lag p99 10.7 s; unpaced, 0.83 s).
 */
const FAN_OUT_BATCH = 100;
/**
 * Rounds (a fan-out, a claim) start at most this often: a node taking creates is woken by each, and a
 * round per create doubled the database work of a create (a claim is a write transaction). Deliveries
 * do not wait on rounds: each process holds a queue per endpoint (claimed ahead, MAX_DEPTH) and starts
 * the next attempt as one ends.
 */
const MIN_ROUND_MS = 10;
/**
 * Beyond the attempt's own bound, so a lease outlives any attempt made under it: as long again as the
 * timeout, up to 5 s (a 10 s timeout: 15 s leases). A node that dies leaves its deliveries that long.
 * A queued delivery is attempted only while its lease still covers a whole attempt; one that waited
 * longer is given back. So deliveries are leased ahead only as deep as the endpoint answers within the
 * margin: depth = perEndpoint × margin / the endpoint's recent attempt time.
 */
const LEASE_MARGIN_MS = 5_000;
/**
 * The longest sleep without looking at the database: wake-ups cover this node's events and, on
 * PostgreSQL, every node's; this covers what none can tell (another process on a SQLite file enabling
 * or retrying, a lease left by a node that died).
 */
const MAX_IDLE_MS = 5_000;
/** After the database failed to answer: how long before asking again. */
const STORAGE_PAUSE_MS = 1_000;

/**
 * Delivers webhooks from this process. Deliveries are leased in the database, so no two processes
 * attempt one at once, and a process that dies mid-attempt leaves a lease that runs out and another
 * (or this one, restarted) attempts it again. Each round fans out the events committed since the last
 * and claims what is due, ahead of time, into a queue per endpoint; attempts start from the queues
 * as others end, up to WEBHOOK_CONCURRENCY_PER_ENDPOINT per endpoint. Between rounds it sleeps until
 * the next delivery is due, or until woken by new events or a queue running low: no polling loop.
 */
export class Deliverer {
  readonly #o: Required<Omit<DelivererOptions, 'metrics' | 'tracer'>> &
    Pick<DelivererOptions, 'metrics' | 'tracer'>;
  /** Who this process is in the leases it takes. */
  readonly #owner = randomUUID();
  /** Every attempt started and not yet recorded, answered or not. */
  readonly #inFlight = new Map<ClaimedDelivery, Promise<void>>();
  readonly #queues: EndpointQueues;
  #stopping = false;
  #woken = false;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  #unwatch: (() => void) | undefined;
  /** Whether events may be left to fan out. */
  #fanOutLeft = true;
  /** Whether the last sleep ran its whole MAX_IDLE_MS, unwoken. */
  #sleptLongest = false;
  /** Whether the last claim found more due than it could take. */
  #moreDue = false;

  constructor(options: DelivererOptions) {
    this.#o = { random: Math.random, ...options };
    this.#queues = new EndpointQueues(options.concurrencyPerEndpoint, this.#leaseMargin());
  }

  start(): void {
    this.#unwatch = this.#o.store.watch(() => this.wake());
    this.#loop = this.#run();
  }

  /** Look at the database now: deliveries may be due. */
  wake(): void {
    this.#woken = true;
    this.#wake?.();
  }

  /**
   * Takes no new attempt; waits up to `graceMs` for those under way, then gives back the leases of any
   * still running and of those queued, so another node attempts them at once rather than after the lease.
   */
  async stop(graceMs: number): Promise<void> {
    this.#stopping = true;
    this.#unwatch?.();
    this.wake();
    await this.#loop;
    const queued = this.#queues.drain();
    const running = [...this.#inFlight.values()];
    if (running.length > 0) {
      const timer = sleep(graceMs, undefined, { ref: false });
      await Promise.race([Promise.all(running), timer]);
    }
    const left = [...queued, ...this.#inFlight.keys()];
    if (left.length > 0) await this.#o.store.releaseLeases(left).catch(() => undefined);
    // Cut what still runs: those attempts fail, and find their lease given back, so record nothing.
    await this.#o.sender.destroy().catch(() => undefined);
    await Promise.allSettled(this.#inFlight.values());
  }

  async #run(): Promise<void> {
    let roundStarted = Number.NEGATIVE_INFINITY;
    while (!this.#stopping) {
      const since = performance.now() - roundStarted;
      if (since < MIN_ROUND_MS) await sleep(MIN_ROUND_MS - since);
      roundStarted = performance.now();
      // Woken (new events), or slept its longest (a wake-up may have been missed): events may wait to be
      // fanned out. A look costs one index lookup.
      if (this.#woken || this.#sleptLongest) this.#fanOutLeft = true;
      this.#woken = false;
      this.#sleptLongest = false;
      let waitMs: number;
      try {
        waitMs = await this.#round();
      } catch (error) {
        this.#logFailure(error, {}, 'claiming webhook deliveries failed');
        waitMs = STORAGE_PAUSE_MS;
      }
      if (waitMs > 0 && !this.#woken && !this.#stopping) {
        await this.#sleep(waitMs);
        this.#sleptLongest = waitMs >= MAX_IDLE_MS && !this.#woken;
      }
    }
  }

  /** Fans out, claims what is due into the queues; resolves to how long to sleep before looking again. */
  async #round(): Promise<number> {
    await this.#fanOut();
    // A recovery's next batch becomes due now (a read, when none is under way).
    await this.#o.store.recoverNext(this.#o.now(), RECOVER_BATCH);
    // Events left to fan out: look again at the next round.
    const fanOutWait = this.#fanOutLeft ? 1 : MAX_IDLE_MS;
    const free = this.#queues.room();
    // Holding all it may: an attempt ending wakes us.
    if (free <= 0) return fanOutWait;
    const now = this.#o.now();
    const leaseUntil = new Date(now.getTime() + this.#o.timeoutMs + this.#leaseMargin());
    const { deliveries: claimed, throttledUntil } = await this.#o.store.claimDue(now, leaseUntil, {
      limit: free,
      perEndpoint: this.#o.concurrencyPerEndpoint,
      owner: this.#owner,
      depthOf: (endpointId) => this.#queues.depthOf(endpointId),
    });
    this.#queues.add(claimed);
    this.#startQueued();
    this.#moreDue = claimed.length === free;
    if (this.#moreDue) return 0;
    const due = await this.#o.store.nextDueAt();
    if (!due) return fanOutWait;
    // Compared with the instant the claim was made at: due by then yet not claimed means its endpoint
    // is at its bound (here or on another node), and an attempt ending wakes us.
    const wait = due.getTime() - now.getTime();
    // A rate-limited endpoint's next token: nothing else would wake us for it.
    const throttled = throttledUntil ? Math.max(1, throttledUntil.getTime() - now.getTime()) : MAX_IDLE_MS;
    return Math.min(wait <= 0 ? MAX_IDLE_MS : Math.min(wait, MAX_IDLE_MS), fanOutWait, throttled);
  }

  #leaseMargin(): number {
    return Math.min(this.#o.timeoutMs, LEASE_MARGIN_MS);
  }

  /**
   * Starts queued attempts, endpoint by endpoint, within each one's bound and this process's. A queued
   * delivery whose lease no longer covers a whole attempt is given back instead: another process may
   * take it once the lease ends, and this one must not attempt it then.
   */
  #startQueued(): void {
    const expired: ClaimedDelivery[] = [];
    const latest = this.#o.now().getTime() + this.#o.timeoutMs;
    for (const [delivery, queue] of this.#queues.startable(latest, expired)) {
      if (this.#stopping) break;
      queue.active += 1;
      this.#queues.sending += 1;
      let answered = false;
      // The slot is free once the answer is in, while its outcome waits to be written with others'.
      const free = () => {
        if (answered) return;
        answered = true;
        queue.active -= 1;
        this.#queues.sending -= 1;
        this.#startQueued();
        // Half gone: claim the next batch while the rest are attempted, so the queue never runs dry
        // while a round (a fan-out, a claim: database round trips) is under way.
        if (this.#queues.low(queue)) this.wake();
      };
      const attempt = this.#attempt(delivery, queue, free).finally(() => {
        this.#queues.held -= 1;
        this.#inFlight.delete(delivery);
        free();
        // Its outcome is written now: a retry may be due (a claim made while it was being written
        // found it still leased).
        this.wake();
      });
      this.#inFlight.set(delivery, attempt);
    }
    if (expired.length > 0)
      this.#o.store.releaseLeases(expired).catch((error: unknown) => {
        this.#logFailure(error, {}, 'giving back webhook delivery leases failed');
      });
  }

  /** The events committed since the last look get their deliveries, a batch a round. */
  async #fanOut(): Promise<void> {
    if (!this.#fanOutLeft) return;
    this.#fanOutLeft = (await this.#o.store.fanOut(FAN_OUT_BATCH)) === FAN_OUT_BATCH;
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = () => {
        this.#wake = undefined;
        done();
      };
    });
  }

  /** A database outage is logged once, when it begins and ends, by the storage; anything else here. */
  #logFailure(error: unknown, context: object, message: string): void {
    if (error instanceof StorageUnavailableError) return;
    this.#o.log.warn({ err: error, ...context }, message);
  }

  async #attempt(delivery: ClaimedDelivery, endpoint: EndpointQueue, answered: () => void): Promise<void> {
    const { store, sender, schedule, now, log, metrics } = this.#o;
    const id = String(delivery.eventId);
    const startedAt = now();
    const timestamp = Math.floor(startedAt.getTime() / 1000);
    const started = performance.now();
    const headers = webhookHeaders(delivery.secrets, id, timestamp, delivery.body);
    const { tracer } = this.#o;
    const result = await (tracer
      ? tracer.attempt(delivery, (trace) =>
          sender.send(delivery.endpointId, delivery.url, { ...headers, ...trace }, delivery.body),
        )
      : sender.send(delivery.endpointId, delivery.url, headers, delivery.body));
    const seconds = (performance.now() - started) / 1000;
    this.#queues.paced(endpoint, seconds * 1000);
    const at = now();
    const outcome = attemptOutcome(delivery, result, { startedAt, at, seconds }, schedule, this.#o.random);
    const { succeeded } = outcome;
    answered();
    let recorded: Awaited<ReturnType<DeliveryQueue['recordAttempt']>>;
    try {
      recorded = await store.recordAttempt(
        delivery,
        outcome,
        new Date(at.getTime() - this.#o.disableAfterMs),
      );
    } catch (error) {
      // The lease runs out and the delivery is attempted again: at least once, never lost.
      log.warn(
        { err: error, endpointId: String(delivery.endpointId), eventId: id },
        'recording a webhook attempt failed',
      );
      return;
    }
    if (!recorded.recorded) return;
    metrics?.attempted(succeeded ? 'succeeded' : recorded.failed ? 'failed' : 'retrying', seconds);
    if (succeeded) metrics?.delivered((at.getTime() - delivery.occurredAt.getTime()) / 1000);
    if (recorded.failed) {
      log.warn(
        {
          endpointId: String(delivery.endpointId),
          eventId: id,
          attempts: delivery.attempts + 1,
          lastError: outcome.error,
        },
        'webhook delivery failed: no attempt left',
      );
    }
    if (recorded.disabled) {
      metrics?.disabled(recorded.disabled);
      log.warn(
        { endpointId: String(delivery.endpointId), reason: recorded.disabled, lastError: outcome.error },
        'webhook endpoint disabled',
      );
    }
  }
}
