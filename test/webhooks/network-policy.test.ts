import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { NetworkPolicy, parseNetworks } from '../../src/domain/network-policy.js';
import { WebhookSender } from '../../src/webhooks/sender.js';
import { assertError } from '../support/error-body.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * The SSRF policy where it applies: at registration (a literal address in the URL) and at connect (the
 * sender, which judges a literal before connecting and a host name on what it resolves to). The ranges
 * themselves are tabled offline in test/domain/network-policy.test.ts. One in-process server (SQLite:
 * the policy does not depend on the backend), with 127.0.0.0/8 let in as the delivery tests do.
 */

/** Each form issue 37 found accepted at registration and at connect, and the NAT64 and 6to4 ones. */
const FORMS = [
  '[::127.0.0.1]', // IPv4-compatible
  '[::a9fe:a9fe]', // IPv4-compatible, carrying 169.254.169.254
  '[::ffff:0:7f00:1]', // SIIT
  '[64:ff9b:1::7f00:1]', // local-use NAT64
  '[fec0::1]', // site-local
  '[2001:0:4136:e378:8000:63bf:3fff:fdd2]', // Teredo
  '192.88.99.1', // 6to4 relay anycast
  '[64:ff9b::7f00:1]', // NAT64
  '[2002:7f00:1::]', // 6to4
] as const;

const REFUSED = 'url must not point to a private, loopback, link-local or otherwise non-public address';

describe('the network policy at registration and at connect', () => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  const allowed = new NetworkPolicy(parseNetworks('127.0.0.0/8'));
  const sender = new WebhookSender(allowed, { timeoutMs: 2_000, connectionsPerEndpoint: 1 });
  before(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer({ env: { WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' } });
  });
  after(async () => {
    await sender.destroy();
    await server.close();
    await receiver.close();
  });

  test('when a URL names one of the forms that carry a private IPv4 address, or a non-public range, then 400 naming url, even with 127.0.0.0/8 allowed', async () => {
    for (const host of FORMS) {
      const res = await server.request('POST', '/v1/webhook-endpoints', {
        body: { url: `http://${host}/hook` },
      });
      assertError(res, 400, 'invalid_request', REFUSED, host);
    }
    const listed = await server.request('GET', '/v1/webhook-endpoints');
    assert.deepEqual(listed.json(), [], 'none was stored');
  });

  test('when 127.0.0.0/8 is allowed, then its IPv4-mapped form is still registered', async () => {
    const res = await server.request('POST', '/v1/webhook-endpoints', {
      body: { url: 'http://[::ffff:127.0.0.1]:9/mapped' },
    });
    assert.equal(res.status, 201, res.text);
  });

  test('when the sender is given one of those forms, then it refuses before connecting', async () => {
    for (const host of FORMS) {
      const url = `http://${host}:9/hook`;
      // The sender names the host as the URL parser wrote it (`::127.0.0.1` is `::7f00:1`).
      const bare = new URL(url).hostname.replace(/^\[|\]$/g, '');
      const result = await sender.send(1n, url, {}, '{}');
      assert.deepEqual(result, { answered: false, error: `refused: ${bare} is not a public address` }, host);
    }
  });

  test('when 127.0.0.0/8 is allowed, then the sender reaches a receiver on 127.0.0.1 through its IPv4-mapped form', async () => {
    const port = new URL(receiver.url()).port;
    const result = await sender.send(1n, `http://[::ffff:127.0.0.1]:${port}/mapped`, {}, '{"mapped":true}');
    assert.equal(result.answered, true, JSON.stringify(result));
    assert.deepEqual(
      receiver.received.filter((r) => r.path === '/mapped').map((r) => r.body),
      ['{"mapped":true}'],
    );
  });
});
