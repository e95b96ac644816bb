import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/** How often the share is given: a pause of share × this for new requests, each period. */
const PERIOD_MS = 100;
/** Busier than this, the node is saturated: requests alone would leave deliveries only what is left. */
const SATURATED = 0.9;
/** Once saturated, it stays so until the loop is idler than this (the pauses themselves idle it). */
const NO_LONGER_SATURATED = 0.6;

/**
 * Webhook deliveries' fair share of a node that serves both (`--role all`). Requests arrive on many
 * connections and deliveries on a few, and the event loop serves whatever is ready in turn: a node
 * saturated by requests gave deliveries one turn per round of requests, 0.02 deliveries per create.
 * So while deliveries are owed and the loop has been saturated, each period begins with `share` of it
 * during which new requests wait (in onRequest, before their body is read), and the deliveries under
 * way, fed from their queues, run in the time that frees. Requests already admitted run on, so the API
 * keeps the rest; an idle or unsaturated node never pauses a request.
 */
export class DeliveryShare {
  readonly #share: number;
  readonly #owed: () => boolean;
  readonly #utilization: () => number;
  #saturated = false;
  #waiting: (() => void)[] = [];
  #closed = false;
  #timer: NodeJS.Timeout | undefined;

  /**
   * `utilization` answers the event loop's utilisation since it was last asked (tests give their own).
   */
  constructor(share: number, owed: () => boolean, utilization: () => number = loopUtilization()) {
    this.#share = share;
    this.#owed = owed;
    this.#utilization = utilization;
  }

  start(): void {
    this.#timer = setInterval(() => this.tick(), PERIOD_MS);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#open();
  }

  /** The start of a period: closes for the deliveries' share when they are owed on a saturated loop. */
  tick(): void {
    const busy = this.#utilization();
    this.#saturated = busy > (this.#saturated ? NO_LONGER_SATURATED : SATURATED);
    if (!this.#saturated || !this.#owed() || this.#closed) return;
    this.#closed = true;
    setTimeout(() => this.#open(), this.#share * PERIOD_MS).unref();
  }

  /** Undefined when a request may go on at once; else resolves when it may. */
  admit(): Promise<void> | undefined {
    if (!this.#closed) return undefined;
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  get closed(): boolean {
    return this.#closed;
  }

  #open(): void {
    this.#closed = false;
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
    app.addHook('onRequest', (_request, _reply, done) => {
      const admitted = share.admit();
      if (admitted) admitted.then(() => done());
      else done();
    });
  },
  { name: 'delivery-share', fastify: '5.x' },
);
