import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/** How often the share is given: a window of share × this, each period. */
const PERIOD_MS = 100;
/** The longest wait for admitted requests to finish before a window opens anyway. */
const MAX_DRAIN_MS = 50;
/** Busier than this, the node is saturated: requests alone would leave deliveries only what is left. */
const SATURATED = 0.9;
/** Once saturated, it stays so until the loop is idler than this (the windows themselves idle it). */
const NO_LONGER_SATURATED = 0.6;

/**
 * Webhook deliveries' fair share of a node that serves both (`--role all`). Requests arrive on many
 * connections and deliveries on a few, and the event loop serves whatever is ready in turn: a node
 * saturated by requests gave deliveries one turn per round of requests, 0.02 deliveries per create.
 * So while deliveries are owed and the loop has been saturated, each period (100 ms) new requests wait
 * (in onRequest, before their body is read) until those admitted have finished, and then for `share` of
 * the period more: a window in which the loop runs deliveries alone, fed from their queues. The API has
 * the rest; an idle or unsaturated node never holds a request back. Live event streams are long-lived
 * and mostly idle: they are not waited for.
 */
export class DeliveryShare {
  readonly #share: number;
  readonly #owed: () => boolean;
  readonly #utilization: () => number;
  readonly #paused: (seconds: number) => void;
  #saturated = false;
  #waiting: (() => void)[] = [];
  /** Requests admitted and not yet answered. */
  #inFlight = 0;
  #state: 'open' | 'draining' | 'window' = 'open';
  #closedAt = 0;
  #drainTimer: NodeJS.Timeout | undefined;
  #timer: NodeJS.Timeout | undefined;

  /**
   * `utilization` answers the event loop's utilisation since it was last asked (tests give their own);
   * `paused` is told of each pause, in seconds (petstore_webhook_delivery_share_seconds_total).
   */
  constructor(
    share: number,
    owed: () => boolean,
    {
      utilization = loopUtilization(),
      paused = () => undefined,
    }: { utilization?: () => number; paused?: (seconds: number) => void } = {},
  ) {
    this.#share = share;
    this.#owed = owed;
    this.#utilization = utilization;
    this.#paused = paused;
  }

  start(): void {
    this.#timer = setInterval(() => this.tick(), PERIOD_MS);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#open();
  }

  /** The start of a period: holds new requests for the deliveries' share when they are owed on a saturated loop. */
  tick(): void {
    const busy = this.#utilization();
    this.#saturated = busy > (this.#saturated ? NO_LONGER_SATURATED : SATURATED);
    if (!this.#saturated || !this.#owed() || this.#state !== 'open') return;
    this.#state = 'draining';
    this.#closedAt = performance.now();
    this.#drainTimer = setTimeout(() => this.#window(), MAX_DRAIN_MS);
    if (this.#inFlight === 0) this.#window();
  }

  /** Undefined when a request may go on at once; else resolves when it may. */
  admit(): Promise<void> | undefined {
    if (this.#state === 'open') return undefined;
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  /** A request admitted: the window waits for it until it is answered (or its connection closes). */
  started(response: ServerResponse): void {
    this.#inFlight += 1;
    response.once('close', () => {
      this.#inFlight -= 1;
      if (this.#inFlight === 0 && this.#state === 'draining') this.#window();
    });
  }

  /** Whether new requests are held now. */
  get holding(): boolean {
    return this.#state !== 'open';
  }

  #window(): void {
    if (this.#state !== 'draining') return;
    clearTimeout(this.#drainTimer);
    this.#state = 'window';
    setTimeout(() => this.#open(), this.#share * PERIOD_MS);
  }

  #open(): void {
    clearTimeout(this.#drainTimer);
    if (this.#state !== 'open') this.#paused((performance.now() - this.#closedAt) / 1000);
    this.#state = 'open';
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const resolve of waiting) resolve();
  }
}

/** The event loop's utilisation between one call and the next. */
function loopUtilization(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const current = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(current, last);
    last = current;
    return utilization;
  };
}

/** Requests in the context it is registered in (/v1) wait while deliveries have their share. */
export const deliveryShare = fp(
  async (app: FastifyInstance, { share }: { share: DeliveryShare }) => {
    app.addHook('onRequest', (request, reply, done) => {
      const go = () => {
        // A live stream is answered for as long as its client stays: no window would ever open.
        if (!(request.headers.accept ?? '').includes('text/event-stream')) share.started(reply.raw);
        done();
      };
      const admitted = share.admit();
      if (admitted) admitted.then(go);
      else go();
    });
  },
  { name: 'delivery-share', fastify: '5.x' },
);
