/**
 * The delivery loop with its database taken away: the service's own Deliverer, sender and signature
 * deliver `n` events shaped as a pet.created is to `url`, from a queue in this process's memory that
 * leases whatever room the loop asks for and records nothing. bench/delivery-cost.ts --floor measures
 * its CPU per delivery beside a `--role deliver` process's and the bare sender's (bench/bare-sender.ts):
 * the loop's own cost is the first step up from the bare sender, the database's the rest. Not a stand-in
 * for any test: it exists only to take the database out of a measurement. It stays up once done, until
 * stopped (SIGTERM, so that --cpu-prof writes).
 *
 *   tsx bench/deliverer-no-database.ts <url> <n>
 */
import { eventJson } from '../src/domain/events.js';
import { NetworkPolicy, parseNetworks } from '../src/domain/network-policy.js';
import type { Claim, ClaimedDelivery, ClaimLimits, DeliveryQueue } from '../src/domain/webhooks.js';
import { Deliverer } from '../src/webhooks/deliverer.js';
import { WebhookSender } from '../src/webhooks/sender.js';

const [url = '', count = '0'] = process.argv.slice(2);
const n = Number(count);
const CONCURRENCY = 4;
const SECRETS = [`whsec_${Buffer.alloc(24, 7).toString('base64')}`];
let next = 1;

/** Leases the next events, as many as the loop has room for; every outcome "recorded" at once. */
const inMemory: Pick<
  DeliveryQueue,
  'claimDue' | 'recordAttempt' | 'fanOut' | 'recoverNext' | 'releaseLeases' | 'watch'
> = {
  async claimDue(now: Date, leaseUntil: Date, { limit }: ClaimLimits): Promise<Claim> {
    const deliveries: ClaimedDelivery[] = [];
    for (; deliveries.length < limit && next <= n; next++) {
      const id = BigInt(next);
      const occurredAt = new Date();
      const data = `{"id":${id},"name":"x","categoryId":1,"status":"available"}`;
      deliveries.push({
        endpointId: 1n,
        eventId: id,
        attempts: 0,
        trigger: 'schedule',
        url,
        secrets: SECRETS,
        body: eventJson({ id, type: 'pet.created', occurredAt, data }),
        eventType: 'pet.created',
        cause: undefined,
        occurredAt,
        leaseUntil,
      });
    }
    return { deliveries, throttledUntil: undefined, nextDueAt: next <= n ? now : undefined };
  },
  recordAttempt: async () => ({ recorded: true, disabled: undefined, failed: false }),
  fanOut: async () => 0,
  recoverNext: async () => 0,
  releaseLeases: async () => undefined,
  watch: () => () => undefined,
};

const noop = () => undefined;
new Deliverer({
  store: inMemory as DeliveryQueue,
  sender: new WebhookSender(new NetworkPolicy(parseNetworks('127.0.0.0/8')), {
    timeoutMs: 10_000,
    connectionsPerEndpoint: CONCURRENCY,
  }),
  schedule: [60_000],
  timeoutMs: 10_000,
  disableAfterMs: 86_400_000,
  concurrencyPerEndpoint: CONCURRENCY,
  now: () => new Date(),
  log: { info: noop, warn: noop },
  metrics: { attempted: noop, disabled: noop, delivered: noop },
}).start();
setInterval(() => undefined, 60_000);
process.once('SIGTERM', () => process.exit(0));
