import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * docs/webhooks.md: one slow receiver holds back only its own deliveries. Two endpoints on one host (one
 * origin) that hangs for one of them: the other's deliveries arrive while the first's are all still
 * held. With one connection pool per origin (undici's Agent), the four held requests took every
 * connection to the host, and the other endpoint's deliveries waited until they timed out. The sender
 * is the same whatever the database: SQLite alone.
 */
const EVENTS = 4;

let server: TestServer;
let receiver: WebhookReceiver;
let release!: () => void;
const released = new Promise<void>((resolve) => {
  release = resolve;
});

before(async () => {
  receiver = await WebhookReceiver.start();
  receiver.answer(async (request) => {
    if (request.path.endsWith('?slow')) await released;
    return { status: 204 };
  });
  // Held attempts must outlast the test: a timeout would free their connections and hide the wait.
  server = await startTestServer({
    env: { WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8', WEBHOOK_TIMEOUT_MS: '120000' },
  });
});
after(async () => {
  release();
  await server.close();
  await receiver.close();
});

test('when one endpoint of a host holds every request, then another endpoint on the same host gets its deliveries meanwhile', async () => {
  for (const query of ['slow', 'prompt']) {
    const res = await server.request('POST', '/v1/webhook-endpoints', {
      body: { url: receiver.url(`/hook?${query}`) },
    });
    assert.equal(res.status, 201, res.text);
  }
  for (let i = 0; i < EVENTS; i++) {
    const res = await server.request('POST', '/v1/pets', { body: { name: `pet ${i}`, categoryId: 1 } });
    assert.equal(res.status, 201, res.text);
  }
  const prompt = await receiver.waitFor(EVENTS, '/hook?prompt');
  assert.deepEqual(
    prompt.map((r) => r.headers['webhook-id']).sort(),
    [...new Set(prompt.map((r) => r.headers['webhook-id']))].sort(),
    'each event once',
  );
  // All of that while the slow endpoint still held its requests: none was answered or dropped.
  const slow = receiver.received.filter((r) => r.path === '/hook?slow');
  assert.equal(slow.length, EVENTS);
  assert.equal(receiver.maxConcurrent.get('/hook?slow'), EVENTS);
  release();
});
