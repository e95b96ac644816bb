import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { StorageUnavailableError } from '../domain/errors.js';
import { type ClaimedDelivery, RECOVER_BATCH } from '../domain/webhooks.js';
import { type AttemptParts, attemptDelivery } from './attempt.js';
import { EndpointQueues } from './endpoint-queues.js';

export interface DelivererOptions extends Omit<AttemptParts, 'random'> {
  timeoutMs: number;
  concurrencyPerEndpoint: number;
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
  readonly #o: DelivererOptions & AttemptParts;
  /** Who this process is in the leases it takes. */
  readonly #owner = randomUUID();
  /** Every attempt started and not yet recorded, answered or not. */
  readonly #inFlight = new Map<ClaimedDelivery, Promise<void>>();
  readonly #queues: EndpointQueues;
  readonly #leaseMarginMs: number;
  #stopping = false;
  #woken = false;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  #unwatch: (() => void) | undefined;
  /**
   * The database told of a change since the last round (watch: events committed, a retry or recovery
   * asked for, an endpoint enabled): fan out and look at the recoveries. An attempt ending only claims.
   */
  #changed = true;
  /** Whether events may be left to fan out. */
  #fanOutLeft = true;
  /** Whether a recovery moved a batch at the last look: it may have more. */
  #recovering = false;
  /** When the fan-out and recoveries were last looked at: at least every MAX_IDLE_MS, told or not. */
  #lookedAt = Number.NEGATIVE_INFINITY;

  constructor(options: DelivererOptions) {
    this.#o = { random: Math.random, ...options };
    this.#leaseMarginMs = Math.min(options.timeoutMs, LEASE_MARGIN_MS);
    this.#queues = new EndpointQueues(options.concurrencyPerEndpoint, this.#leaseMarginMs);
  }

  start(): void {
    this.#unwatch = this.#o.store.watch(() => {
      this.#changed = true;
      this.wake();
    });
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
      this.#woken = false;
      let waitMs: number;
      try {
        waitMs = await this.#round();
      } catch (error) {
        this.#logFailure(error, 'claiming webhook deliveries failed');
        waitMs = STORAGE_PAUSE_MS;
      }
      if (waitMs > 0 && !this.#woken && !this.#stopping) await this.#sleep(waitMs);
    }
  }

  /** Fans out, claims what is due into the queues; resolves to how long to sleep before looking again. */
  async #round(): Promise<number> {
    // Told of a change, or not looked for a while (a change none can tell: another process on a SQLite
    // file, a lease left by a node that died): events may wait to be fanned out, a recovery to move on.
    const stale = performance.now() - this.#lookedAt >= MAX_IDLE_MS;
    if (this.#changed || stale) {
      this.#changed = false;
      this.#lookedAt = performance.now();
      this.#fanOutLeft = true;
      this.#recovering = true;
    }
    if (this.#fanOutLeft) this.#fanOutLeft = (await this.#o.store.fanOut(FAN_OUT_BATCH)) === FAN_OUT_BATCH;
    // A recovery's next batch becomes due now.
    if (this.#recovering)
      this.#recovering = (await this.#o.store.recoverNext(this.#o.now(), RECOVER_BATCH)) > 0;
    // Events left to fan out: look again at the next round.
    const fanOutWait = this.#fanOutLeft ? 1 : MAX_IDLE_MS;
    const free = this.#queues.room();
    // Holding all it may: an attempt ending wakes us.
    if (free <= 0) return fanOutWait;
    const now = this.#o.now();
    const leaseUntil = new Date(now.getTime() + this.#o.timeoutMs + this.#leaseMarginMs);
    const {
      deliveries: claimed,
      throttledUntil,
      nextDueAt: due,
    } = await this.#o.store.claimDue(now, leaseUntil, {
      limit: free,
      perEndpoint: this.#o.concurrencyPerEndpoint,
      owner: this.#owner,
      depths: this.#queues.depths(),
    });
    this.#queues.add(claimed);
    this.#startQueued();
    // More due than it could take: round again.
    if (claimed.length === free) return 0;
    if (!due) return fanOutWait;
    // Compared with the instant the claim was made at: due by then yet not claimed means its endpoint
    // is at its bound (here or on another node), and an attempt ending wakes us.
    const wait = due.getTime() - now.getTime();
    // A rate-limited endpoint's next token: nothing else would wake us for it.
    const throttled = throttledUntil ? Math.max(1, throttledUntil.getTime() - now.getTime()) : MAX_IDLE_MS;
    return Math.min(wait <= 0 ? MAX_IDLE_MS : Math.min(wait, MAX_IDLE_MS), fanOutWait, throttled);
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
      // The slot is free once the answer is in (`ms` later), while its outcome waits to be written with
      // others'; or once the attempt ended, if it ended unanswered.
      const free = (ms?: number) => {
        if (answered) return;
        answered = true;
        if (ms !== undefined) this.#queues.paced(queue, ms);
        queue.active -= 1;
        this.#queues.sending -= 1;
        this.#startQueued();
        // Half gone: claim the next batch while the rest are attempted, so the queue never runs dry
        // while a round (a fan-out, a claim: database round trips) is under way.
        if (this.#queues.low(queue)) this.wake();
      };
      const attempt = attemptDelivery(this.#o, delivery, free).then((retrying) => {
        this.#queues.held -= 1;
        this.#inFlight.delete(delivery);
        free();
        // Its outcome is written now: its retry may be due, or the endpoint's bound (which counts the
        // leases of outcomes not yet written) may have kept the last claim short of what is due.
        if (retrying || this.#queues.low(queue)) this.wake();
      });
      this.#inFlight.set(delivery, attempt);
    }
    if (expired.length > 0)
      this.#o.store.releaseLeases(expired).catch((error: unknown) => {
        this.#logFailure(error, 'giving back webhook delivery leases failed');
      });
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
  #logFailure(error: unknown, message: string): void {
    if (error instanceof StorageUnavailableError) return;
    this.#o.log.warn({ err: error }, message);
  }
}
