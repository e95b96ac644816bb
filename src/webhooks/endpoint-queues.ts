import type { ClaimedDelivery } from '../domain/webhooks.js';

/**
 * Attempts this process makes at once, across endpoints: requests waiting for their answer. An answered
 * one whose outcome waits to be written with others' no longer counts: counted, the attempts answered
 * within one linger of the outcomes' batch held every slot, and deliveries stalled until it was written
 * (about 64 per 12 ms, 4,400 a second on one endpoint, whatever its pace).
 */
export const MAX_IN_FLIGHT = 64;
/**
 * Deliveries it holds leases on at once: those under way, those answered whose outcome is not written
 * yet, and those queued behind them. Four endpoints at their full depth.
 */
export const MAX_HELD = 2048;
/**
 * The most of one endpoint's deliveries it leases at once (while no other process holds any of them).
 * An endpoint's leases are taken back only once their outcomes are written (a batch every linger), so
 * this bounds one endpoint's pace to about MAX_DEPTH per round and batch: at 128, about 6,400
 * deliveries a second however fast the endpoint answered.
 */
const MAX_DEPTH = 512;
/** Endpoints whose pace is remembered while they have nothing queued. */
const MAX_REMEMBERED = 256;
/** How much each attempt's duration weighs in an endpoint's recent attempt time (an EWMA). */
const LATENCY_WEIGHT = 0.2;
/** One endpoint's deliveries held by this process: queued, and under way. */
export interface EndpointQueue {
  queued: ClaimedDelivery[];
  active: number;
  /** Recent attempt time, in ms (EWMA); undefined before the first. */
  latencyMs: number | undefined;
  /** How deep it was last leased ahead. */
  depth: number;
}

/**
 * The deliveries this process holds leases on, a queue per endpoint, and the bounds on starting them:
 * WEBHOOK_CONCURRENCY_PER_ENDPOINT attempts to an endpoint, MAX_IN_FLIGHT in all. Each endpoint's
 * recent attempt time sets how deep it is leased ahead (depths).
 */
export class EndpointQueues {
  readonly #queues = new Map<bigint, EndpointQueue>();
  readonly #perEndpoint: number;
  readonly #leaseMarginMs: number;
  /** Leased and not yet recorded: queued, under way, or answered and waiting to be written. */
  held = 0;
  /** Attempts waiting for their answer: the queues' `active` summed, kept as a count. */
  sending = 0;

  constructor(perEndpoint: number, leaseMarginMs: number) {
    this.#perEndpoint = perEndpoint;
    this.#leaseMarginMs = leaseMarginMs;
  }

  /** How many more this process may lease. */
  room(): number {
    return MAX_HELD - this.held;
  }

  add(deliveries: readonly ClaimedDelivery[]): void {
    for (const delivery of deliveries) this.#queueOf(delivery.endpointId).queued.push(delivery);
    this.held += deliveries.length;
  }

  /**
   * How deep to lease each endpoint ahead whose pace is known: as many as it answers within the lease's
   * margin, given its pace. Those not named are leased `perEndpoint` deep.
   */
  depths(): Map<bigint, number> {
    const depths = new Map<bigint, number>();
    for (const [endpointId, queue] of this.#queues) {
      if (queue.latencyMs === undefined) continue;
      queue.depth = Math.max(
        this.#perEndpoint,
        Math.min(
          MAX_DEPTH,
          Math.floor((this.#perEndpoint * this.#leaseMarginMs) / Math.max(1, queue.latencyMs)),
        ),
      );
      depths.set(endpointId, queue.depth);
    }
    return depths;
  }

  /**
   * The queued deliveries that may start now, endpoint by endpoint, within both bounds (checked as each
   * is taken: the caller starts it, and counts it in `active` and `sending`, before taking the next). One
   * whose lease ends before `latestLeaseEnd` goes to `expired` instead: it no longer covers an attempt.
   */
  *startable(
    latestLeaseEnd: number,
    expired: ClaimedDelivery[],
  ): Generator<[ClaimedDelivery, EndpointQueue]> {
    for (const [endpointId, queue] of this.#queues) {
      while (queue.queued.length > 0 && queue.active < this.#perEndpoint && this.sending < MAX_IN_FLIGHT) {
        const delivery = queue.queued.shift() as ClaimedDelivery;
        if (delivery.leaseUntil.getTime() <= latestLeaseEnd) {
          expired.push(delivery);
          this.held -= 1;
          continue;
        }
        yield [delivery, queue];
      }
      // An idle endpoint's pace is kept for its next claim; past a few hundred, idle ones are forgotten.
      if (queue.queued.length === 0 && queue.active === 0 && this.#queues.size > MAX_REMEMBERED)
        this.#queues.delete(endpointId);
    }
  }

  /** Whether an endpoint's queue is running low: time to claim its next batch. */
  low(queue: EndpointQueue): boolean {
    return queue.queued.length < Math.max(this.#perEndpoint, queue.depth / 2);
  }

  /** An attempt took `ms`: the endpoint's recent attempt time moves towards it. */
  paced(queue: EndpointQueue, ms: number): void {
    queue.latencyMs =
      queue.latencyMs === undefined ? ms : queue.latencyMs + LATENCY_WEIGHT * (ms - queue.latencyMs);
  }

  /** Every queued delivery, taken out (a stopping process gives their leases back). */
  drain(): ClaimedDelivery[] {
    return [...this.#queues.values()].flatMap((queue) => queue.queued.splice(0));
  }

  #queueOf(endpointId: bigint): EndpointQueue {
    let queue = this.#queues.get(endpointId);
    if (!queue) {
      queue = { queued: [], active: 0, latencyMs: undefined, depth: 0 };
      this.#queues.set(endpointId, queue);
    }
    return queue;
  }
}
