import { setTimeout as sleep } from 'node:timers/promises';
import { StorageUnavailableError } from '../domain/errors.js';
import { nextAttemptAt } from '../domain/retry-schedule.js';
import type { AttemptOutcome, ClaimedDelivery, WebhookStore } from '../domain/webhooks.js';
import type { SendResult, WebhookSender } from './sender.js';
import { signatureHeader } from './signature.js';

export interface DelivererLog {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
}

export interface DelivererMetrics {
  attempted(outcome: 'succeeded' | 'retrying' | 'failed', seconds: number): void;
  disabled(reason: string): void;
}

/** Runs one attempt inside a trace span; `send` gets the headers that carry it (traceparent). */
export interface DeliveryTracer {
  attempt(
    delivery: ClaimedDelivery,
    send: (headers: Record<string, string>) => Promise<SendResult>,
  ): Promise<SendResult>;
}

export interface DelivererOptions {
  store: WebhookStore;
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

/** Attempts this node makes at once, across endpoints. */
const MAX_IN_FLIGHT = 64;
/**
 * Fanning out: events given their deliveries per transaction, and the most of the time it may take
 * (after a fan-out that took t, the next waits t / share - t). With a hundred endpoints an event is a
 * hundred rows: back to back, fanning out took most of what a node (SQLite) or the database
 * (PostgreSQL, where the node itself looks idle) could do, and creates fell to 0.46 of their rate
 * without endpoints. While requests keep the node busy, smaller batches and a smaller share: the
 * deliveries wait (the oldest pending age shows it) rather than the requests. At WEBHOOK_MAX_ENDPOINTS'
 * default, a batch of 100 events is at most 10,000 rows, a few milliseconds of SQLite's one writer.
 */
const FAN_OUT = { batch: 100, share: 0.2 };
const BUSY_FAN_OUT = { batch: 10, share: 0.05 };
/**
 * Rounds (a fan-out, a claim) start at most this often: a node taking creates is woken by each, and a
 * round per create doubled the database work of a create (a claim is a write transaction).
 */
const MIN_ROUND_MS = 10;
/**
 * Requests come first. While the event loop is busier than this (requests keep it saturated), delivery
 * yields: a few attempts at once, and a pause between claims. Deliveries then wait (the pending gauge
 * and the oldest pending age show it) and catch up once the load eases; none is lost.
 */
const BUSY_UTILIZATION = 0.9;
const BUSY_IN_FLIGHT = 8;
const BUSY_PAUSE_MS = 50;
/** How often the event loop's utilisation is sampled. */
const UTILIZATION_SAMPLE_MS = 250;
/**
 * Beyond the attempt's own bound, so a lease outlives any attempt made under it: as long again as the
 * timeout, up to 5 s (a 10 s timeout: 15 s leases). A node that dies leaves its deliveries that long.
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
 * Delivers webhooks from this node. Every node runs one: deliveries are leased in the database, so no
 * two nodes attempt one at once, and a node that dies mid-attempt leaves a lease that runs out and
 * another node (or this one, restarted) attempts it again. Between attempts it sleeps until the next
 * delivery is due, or until woken by new deliveries: no polling loop.
 */
export class Deliverer {
  readonly #o: Required<Omit<DelivererOptions, 'metrics' | 'tracer'>> &
    Pick<DelivererOptions, 'metrics' | 'tracer'>;
  readonly #inFlight = new Map<ClaimedDelivery, Promise<void>>();
  #stopping = false;
  #woken = false;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  #unwatch: (() => void) | undefined;
  /** When the next fan-out may start (performance.now()), and whether events may be left to fan out. */
  #fanOutAt = 0;
  #fanOutLeft = true;

  constructor(options: DelivererOptions) {
    this.#o = { random: Math.random, ...options };
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
   * still running, so another node attempts them at once rather than after the lease.
   */
  async stop(graceMs: number): Promise<void> {
    this.#stopping = true;
    this.#unwatch?.();
    this.wake();
    await this.#loop;
    const running = [...this.#inFlight.values()];
    if (running.length > 0) {
      const timer = sleep(graceMs, undefined, { ref: false });
      await Promise.race([Promise.all(running), timer]);
    }
    const left = [...this.#inFlight.keys()];
    if (left.length > 0) await this.#o.store.releaseLeases(left).catch(() => undefined);
    // Cut what still runs: those attempts fail, and find their lease given back, so record nothing.
    await this.#o.sender.destroy().catch(() => undefined);
    await Promise.allSettled(this.#inFlight.values());
  }

  async #run(): Promise<void> {
    const busy = busyGauge();
    try {
      let roundStarted = Number.NEGATIVE_INFINITY;
      while (!this.#stopping) {
        const since = performance.now() - roundStarted;
        if (since < MIN_ROUND_MS) await sleep(MIN_ROUND_MS - since);
        roundStarted = performance.now();
        // Woken: new events may wait to be fanned out.
        if (this.#woken) this.#fanOutLeft = true;
        this.#woken = false;
        let waitMs: number;
        try {
          waitMs = busy.now()
            ? await this.#claimAndStart(BUSY_IN_FLIGHT, BUSY_FAN_OUT)
            : await this.#claimAndStart(MAX_IN_FLIGHT, FAN_OUT);
        } catch (error) {
          this.#logFailure(error, {}, 'claiming webhook deliveries failed');
          waitMs = STORAGE_PAUSE_MS;
        }
        // Busy: a pause no wake-up cuts short, so new events do not make a claim each.
        if (busy.now() && !this.#stopping) await sleep(BUSY_PAUSE_MS);
        if (waitMs > 0 && !this.#woken && !this.#stopping) await this.#sleep(waitMs);
      }
    } finally {
      busy.stop();
    }
  }

  /** Starts the attempts that are due; resolves to how long to sleep before looking again. */
  async #claimAndStart(maxInFlight: number, fanOut: typeof FAN_OUT): Promise<number> {
    await this.#fanOut(fanOut);
    // Events left to fan out: look again when the next fan-out may start.
    const fanOutWait = this.#fanOutLeft
      ? Math.max(1, Math.ceil(this.#fanOutAt - performance.now()))
      : MAX_IDLE_MS;
    const free = maxInFlight - this.#inFlight.size;
    // Every slot taken: an attempt ending wakes us.
    if (free <= 0) return fanOutWait;
    const now = this.#o.now();
    const leaseUntil = new Date(
      now.getTime() + this.#o.timeoutMs + Math.min(this.#o.timeoutMs, LEASE_MARGIN_MS),
    );
    const claimed = await this.#o.store.claimDue(now, leaseUntil, free, this.#o.concurrencyPerEndpoint);
    for (const delivery of claimed) {
      const attempt = this.#attempt(delivery).finally(() => {
        this.#inFlight.delete(delivery);
        this.wake(); // a slot is free, and its endpoint may have more due
      });
      this.#inFlight.set(delivery, attempt);
    }
    if (claimed.length === free) return 0; // more may be due
    const due = await this.#o.store.nextDueAt();
    if (!due) return fanOutWait;
    // Compared with the instant the claim was made at: due by then yet not claimed means its endpoint
    // is at its bound (or this node is), and an attempt ending wakes us.
    const wait = due.getTime() - now.getTime();
    return Math.min(wait <= 0 ? MAX_IDLE_MS : Math.min(wait, MAX_IDLE_MS), fanOutWait);
  }

  /** The events committed since the last look get their deliveries, a batch at a time, within a share of the time. */
  async #fanOut({ batch, share }: typeof FAN_OUT): Promise<void> {
    const started = performance.now();
    if (!this.#fanOutLeft || started < this.#fanOutAt) return;
    const events = await this.#o.store.fanOut(batch);
    const took = performance.now() - started;
    this.#fanOutLeft = events === batch;
    this.#fanOutAt = started + took / share;
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

  async #attempt(delivery: ClaimedDelivery): Promise<void> {
    const { store, sender, schedule, now, log, metrics } = this.#o;
    const id = String(delivery.eventId);
    const timestamp = Math.floor(now().getTime() / 1000);
    const started = performance.now();
    const headers = {
      'webhook-id': id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatureHeader(delivery.secrets, id, timestamp, delivery.body),
    };
    const { tracer } = this.#o;
    const result = await (tracer
      ? tracer.attempt(delivery, (trace) =>
          sender.send(delivery.endpointId, delivery.url, { ...headers, ...trace }, delivery.body),
        )
      : sender.send(delivery.endpointId, delivery.url, headers, delivery.body));
    const seconds = (performance.now() - started) / 1000;
    const at = now();
    const succeeded = result.answered && result.status >= 200 && result.status < 300;
    const gone = result.answered && result.status === 410;
    const outcome: AttemptOutcome = {
      at,
      succeeded,
      gone,
      responseStatus: result.answered ? result.status : undefined,
      error: succeeded
        ? undefined
        : result.answered
          ? `HTTP ${result.status}${result.body ? `: ${result.body}` : ''}`.slice(0, 1024 + 16)
          : result.error,
      nextAttemptAt:
        succeeded || gone ? undefined : nextAttemptAt(schedule, delivery.attempts + 1, at, this.#o.random),
    };
    let recorded: Awaited<ReturnType<WebhookStore['recordAttempt']>>;
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

/** Whether the event loop has been busier than BUSY_UTILIZATION over the last sample. */
function busyGauge(): { now(): boolean; stop(): void } {
  let last = performance.eventLoopUtilization();
  let busy = false;
  const timer = setInterval(() => {
    const current = performance.eventLoopUtilization();
    busy = performance.eventLoopUtilization(current, last).utilization > BUSY_UTILIZATION;
    last = current;
  }, UTILIZATION_SAMPLE_MS);
  timer.unref();
  return { now: () => busy, stop: () => clearInterval(timer) };
}
