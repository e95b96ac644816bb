import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { NetworkPolicy, parseNetworks } from '../../src/domain/network-policy.js';
import type { Claim, ClaimedDelivery, ClaimLimits, DeliveryQueue } from '../../src/domain/webhooks.js';
import { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.js';
import type { DelivererLog } from '../../src/webhooks/attempt.js';
import { Deliverer, type DelivererOptions } from '../../src/webhooks/deliverer.js';
import { WebhookSender } from '../../src/webhooks/sender.js';
import { cleanUpInReverse } from './backends.js';
import { poll } from './cli.js';
import type { Answer, WebhookReceiver } from './webhook-receiver.js';

/**
 * For the deliverer's tests (test/webhooks/deliverer*.test.ts), in process: the real SQLite storage in memory, seen through a wrapper that
 * records what the deliverer asks of it (and fails a call when told to), the real sender, and a
 * receiver in this process. Rounds are told apart by the order of those calls, never by their timing.
 */

/** One call the deliverer made to the delivery queue, with what it was given and what it got. */
export type Call =
  | { name: 'fanOut'; batch: number; result: number }
  | { name: 'recoverNext'; now: Date; batch: number; result: number }
  | { name: 'claimDue'; now: Date; leaseUntil: Date; limits: ClaimLimits; result: Claim }
  | { name: 'releaseLeases'; deliveries: ClaimedDelivery[] };

export interface Setup {
  /** The receiver's path for this test's endpoint, so that each test's requests are its own. */
  path: string;
  timeoutMs?: number;
  concurrencyPerEndpoint?: number;
  schedule?: readonly number[];
  /** The endpoint's rateLimit (deliveries a second); none if left out. */
  rateLimit?: number;
  /** False: the queue tells the deliverer of no change, so it rounds only when started, woken or idle. */
  watched?: boolean;
}

export class Harness {
  readonly calls: Call[] = [];
  readonly logged: [string, object, string][] = [];
  /** Errors the next calls of a method throw, in order, instead of asking the database. */
  readonly failing: Partial<Record<'fanOut' | 'recoverNext' | 'claimDue' | 'releaseLeases', Error[]>> = {};
  /** Called once a claim has been answered (a test moves the clock on there). */
  afterClaim: (() => void) | undefined;
  /** Added to the real time on the deliverer's clock. */
  offsetMs = 0;
  readonly queue: DeliveryQueue;
  #deliverers: Deliverer[] = [];

  constructor(
    readonly storage: SqliteStorage,
    readonly endpointId: bigint,
    readonly setup: Setup,
  ) {
    const inner = storage.deliveries;
    const failure = (name: keyof Harness['failing']) => {
      const error = this.failing[name]?.shift();
      if (error) throw error;
    };
    const overrides: Partial<DeliveryQueue> = {
      fanOut: async (batch) => {
        failure('fanOut');
        const result = await inner.fanOut(batch);
        this.calls.push({ name: 'fanOut', batch, result });
        return result;
      },
      recoverNext: async (now, batch) => {
        failure('recoverNext');
        const result = await inner.recoverNext(now, batch);
        this.calls.push({ name: 'recoverNext', now, batch, result });
        return result;
      },
      claimDue: async (now, leaseUntil, limits) => {
        failure('claimDue');
        const result = await inner.claimDue(now, leaseUntil, limits);
        this.calls.push({ name: 'claimDue', now, leaseUntil, limits: { ...limits }, result });
        this.afterClaim?.();
        return result;
      },
      releaseLeases: async (deliveries) => {
        this.calls.push({ name: 'releaseLeases', deliveries: [...deliveries] });
        failure('releaseLeases');
        await inner.releaseLeases(deliveries);
      },
      watch: (listener) => (setup.watched === false ? () => undefined : inner.watch(listener)),
    };
    this.queue = new Proxy(inner, {
      get: (target, name: keyof DeliveryQueue) =>
        overrides[name] ?? (target[name] as (...args: unknown[]) => unknown).bind(target),
    });
  }

  readonly log: DelivererLog = {
    info: (object, message) => this.logged.push(['info', object, message]),
    warn: (object, message) => this.logged.push(['warn', object, message]),
  };

  /** A deliverer on the wrapped queue, started; stopped (with no grace) when the test ends. */
  start(overrides: Partial<DelivererOptions> = {}): Deliverer {
    const timeoutMs = this.setup.timeoutMs ?? 2_000;
    const deliverer = new Deliverer({
      store: this.queue,
      sender: new WebhookSender(new NetworkPolicy(parseNetworks('127.0.0.0/8')), {
        timeoutMs,
        connectionsPerEndpoint: 4,
      }),
      schedule: this.setup.schedule ?? [60_000],
      timeoutMs,
      disableAfterMs: 3_600_000,
      concurrencyPerEndpoint: this.setup.concurrencyPerEndpoint ?? 4,
      now: () => new Date(Date.now() + this.offsetMs),
      log: this.log,
      random: () => 0.5,
      ...overrides,
    });
    return this.run(deliverer);
  }

  /** Starts `deliverer`; stopped (with no grace) when the test ends. */
  run(deliverer: Deliverer): Deliverer {
    deliverer.start();
    this.#deliverers.push(deliverer);
    return deliverer;
  }

  async stopAll(): Promise<void> {
    for (const deliverer of this.#deliverers.splice(0)) await deliverer.stop(0);
  }

  async createPets(count: number): Promise<void> {
    for (let i = 0; i < count; i++)
      await this.storage.pets.create({ pet: { name: `pet ${i}`, categoryId: 1n, status: 'available' } });
  }

  /** The endpoint's deliveries, by event id, as `status/attempts`. */
  async deliveries(): Promise<Record<string, string>> {
    const listed = await this.storage.deliveries.listDeliveries({
      endpointId: this.endpointId,
      beforeEventId: undefined,
      limit: 1_000,
    });
    return Object.fromEntries(listed.map((d) => [String(d.eventId), `${d.status}/${d.attempts}`]).reverse());
  }

  /** Waits until every delivery of the endpoint is in `status` and there are `count` of them. */
  async settled(count: number, status = 'succeeded'): Promise<Record<string, string>> {
    return poll(`${count} deliveries ${status}`, async () => {
      const now = await this.deliveries();
      const values = Object.values(now);
      return values.length === count && values.every((v) => v.startsWith(`${status}/`)) ? now : undefined;
    });
  }

  /** The calls' names in order, with what each got: `fanOut 100`, `claimDue 3` (deliveries leased). */
  trace(): string[] {
    return this.calls.map((call) =>
      call.name === 'claimDue'
        ? `claimDue ${call.result.deliveries.length}`
        : call.name === 'releaseLeases'
          ? `releaseLeases ${call.deliveries.map((d) => d.eventId).join(',')}`
          : `${call.name} ${call.result}`,
    );
  }

  claims(): Extract<Call, { name: 'claimDue' }>[] {
    return this.calls.filter((call): call is Extract<Call, { name: 'claimDue' }> => call.name === 'claimDue');
  }
}

/**
 * Harnesses on `receiver`: each a database in memory with one endpoint at the receiver's `setup.path`
 * (answered by `answer`, else 204), all closed when the test ends.
 */
export function harnesses(receiver: () => WebhookReceiver) {
  async function harness(
    t: TestContext,
    setup: Setup,
    answer?: (n: number) => Answer | Promise<Answer>,
  ): Promise<Harness> {
    const later = cleanUpInReverse(t);
    const storage = new SqliteStorage(':memory:', { timeoutMs: 1_000 });
    later(() => storage.close());
    const endpoint = await storage.webhookEndpoints.createEndpoint(
      {
        url: receiver().url(setup.path),
        types: ['*'],
        description: '',
        secret: 'whsec_AAAA',
        createdAt: new Date(),
        rateLimit: setup.rateLimit,
      },
      10,
    );
    assert.ok(endpoint);
    let n = 0;
    receiver().answer((request) =>
      request.path === setup.path && answer
        ? answer(++n)
        : { status: request.path === setup.path ? 204 : 404 },
    );
    const h = new Harness(storage, endpoint.id, setup);
    later(() => h.stopAll());
    return h;
  }
  const requestsTo = (path: string) => receiver().received.filter((r) => r.path === path);
  const eventIds = (path: string) => requestsTo(path).map((r) => (JSON.parse(r.body) as { id: number }).id);
  return { harness, requestsTo, eventIds };
}
