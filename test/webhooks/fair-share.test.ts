import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Storage } from '../../src/domain/storage.js';
import { sqlite } from '../support/backends.js';
import { poll } from '../support/cli.js';
import { startTestServer } from '../support/test-server.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * Deliveries of a node that requests saturate (`--role all`, as `petstore serve` runs it: deliveries on a
 * thread of their own). Each create is made to cost 2 ms of the API's event loop (its storage burns it),
 * and 32 clients keep creating: that loop is saturated by requests alone. Deliveries are counted while
 * the creates go on.
 */

/** Each create holds the event loop this long: requests, not a timer, saturate it. */
const CREATE_COST_MS = 2;
const CLIENTS = 32;
const CREATES = 800;

function costlyCreates(storage: Storage): Storage {
  const create = storage.pets.create.bind(storage.pets);
  storage.pets.create = (creation) => {
    const end = performance.now() + CREATE_COST_MS;
    while (performance.now() < end) {
      // the work of a costly request
    }
    return create(creation);
  };
  return storage;
}

test("when requests saturate a node that also delivers, then deliveries go on meanwhile on their own thread: at least 1 delivery for every 10 creates, and the thread counts them in the node's /metrics", async (t) => {
  const receiver = await WebhookReceiver.start();
  t.after(() => receiver.close());
  const server = await startTestServer({
    backend: sqlite,
    env: { WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' },
    // The API's storage is made costly; the delivery thread opens its own.
    wrapStorage: costlyCreates,
    deliveryThread: true,
  });
  t.after(() => server.close());
  const endpoint = await server.request('POST', '/v1/webhook-endpoints', {
    body: { url: receiver.url('/share') },
  });
  assert.equal(endpoint.status, 201);

  let created = 0;
  let deliveredWhileCreating = 0;
  const client = async () => {
    while (created < CREATES) {
      const res = await server.request('POST', '/v1/pets', { body: { name: 'busy', categoryId: 1 } });
      assert.equal(res.status, 201);
      created += 1;
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, client));
  deliveredWhileCreating = receiver.received.length;
  t.diagnostic(`${created} creates, ${deliveredWhileCreating} deliveries meanwhile`);
  // Left only what requests leave of one event loop, deliveries made 0.02 per create (docs/benchmarks.md).
  assert.ok(
    deliveredWhileCreating * 10 >= created,
    `${deliveredWhileCreating} deliveries while ${created} creates were made`,
  );
  // And every one of them is delivered in the end, each counted by the node (the thread sends its counts).
  await receiver.waitFor(created, '/share');
  const counted = await poll('the thread to count every delivery', async () => {
    const text = (await server.request('GET', '/metrics')).text;
    const n = Number(/^petstore_webhook_attempts_total\{outcome="succeeded"\} (\d+)$/m.exec(text)?.[1]);
    return n >= created ? n : undefined;
  });
  assert.equal(counted, created);
});
