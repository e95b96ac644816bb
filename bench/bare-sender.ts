/**
 * A delivery with its database taken away: the service's own WebhookSender and signature POST `n`
 * events shaped as the deliverer sends them to `url`, 4 at a time (WEBHOOK_CONCURRENCY_PER_ENDPOINT),
 * then the process exits. bench/delivery-cost.ts --floor measures its CPU per POST beside a
 * `--role deliver` process's: what is left is what claiming, leasing and recording cost. It stays up
 * once done, until stopped, so that its CPU can still be read.
 *
 *   tsx bench/bare-sender.ts <url> <n>
 */
import { NetworkPolicy, parseNetworks } from '../src/domain/network-policy.js';
import { WebhookSender } from '../src/webhooks/sender.js';
import { webhookHeaders } from '../src/webhooks/signature.js';

const [url = '', count = '0'] = process.argv.slice(2);
const n = Number(count);
const CONCURRENCY = 4;
const SECRETS = [`whsec_${Buffer.alloc(24, 7).toString('base64')}`];
const sender = new WebhookSender(new NetworkPolicy(parseNetworks('127.0.0.0/8')), {
  timeoutMs: 10_000,
  connectionsPerEndpoint: CONCURRENCY,
});

let next = 1;
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (next <= n) {
      const id = next++;
      // As eventJson writes a pet.created event: the receiver notes its lag by data.id.
      const occurredAt = new Date().toISOString();
      const body = `{"id":${id},"type":"pet.created","occurredAt":"${occurredAt}","data":{"id":${id},"name":"x","categoryId":1,"status":"available"}}`;
      const headers = webhookHeaders(SECRETS, String(id), Math.floor(Date.now() / 1000), body);
      const result = await sender.send(1n, url, headers, body);
      if (!result.answered || result.status !== 204) throw new Error(`POST ${id}: ${JSON.stringify(result)}`);
    }
  }),
);
await sender.destroy();
setInterval(() => undefined, 60_000);
// An exit of its own on SIGTERM, so that --cpu-prof (delivery-cost --profile) writes its profile.
process.once('SIGTERM', () => process.exit(0));
