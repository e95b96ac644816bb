import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import { EVENT_TYPES } from '../../src/domain/events.js';
import { signatureHeader } from '../../src/webhooks/signature.js';
import { after, before, sqlite, test } from '../support/backends.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

/**
 * The OpenAPI document describes each event's delivery under OpenAPI 3.1's top-level `webhooks`, and
 * lists the events and webhooks operations under their tags; the signature it documents is the one
 * the reference library verifies.
 */

interface WebhookOperation {
  operationId: string;
  tags: string[];
  parameters: { name: string; in: string; required: boolean }[];
  requestBody: { content: Record<string, { schema: { $ref: string } }> };
  responses: Record<string, unknown>;
}

sqlite.describe('the OpenAPI document: events and webhooks', () => {
  let server: TestServer;
  let document: {
    webhooks: Record<string, { post: WebhookOperation }>;
    tags: { name: string }[];
    paths: Record<string, Record<string, { operationId: string; tags: string[] }>>;
  };
  before(async () => {
    server = await startTestServer();
    document = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as typeof document;
  });
  after(() => server.close());

  test('when the document is read, then webhooks describes a POST per event type with the Event body and the three Standard Webhooks headers', () => {
    assert.deepEqual(Object.keys(document.webhooks), [...EVENT_TYPES]);
    for (const type of EVENT_TYPES) {
      const post = document.webhooks[type]?.post as WebhookOperation;
      assert.deepEqual(post.tags, ['webhooks']);
      assert.deepEqual(
        post.parameters.map((p) => [p.name, p.in, p.required]),
        [
          ['webhook-id', 'header', true],
          ['webhook-timestamp', 'header', true],
          ['webhook-signature', 'header', true],
        ],
      );
      assert.equal(post.requestBody.content['application/json']?.schema.$ref, '#/components/schemas/Event');
      assert.deepEqual(Object.keys(post.responses).sort(), ['2XX', '410', 'default']);
    }
  });

  test('when the operations are read, then the events and webhooks tags hold exactly their operations', () => {
    assert.ok(document.tags.some((t) => t.name === 'events'));
    assert.ok(document.tags.some((t) => t.name === 'webhooks'));
    const byTag = (tag: string) =>
      Object.values(document.paths)
        .flatMap((methods) => Object.values(methods))
        .filter((op) => op.tags?.includes(tag))
        .map((op) => op.operationId)
        .sort();
    assert.deepEqual(byTag('events'), ['getEvent', 'listEvents']);
    assert.deepEqual(byTag('webhooks'), [
      'createWebhookEndpoint',
      'deleteWebhookEndpoint',
      'enableWebhookEndpoint',
      'getWebhookEndpoint',
      'listWebhookAttempts',
      'listWebhookDeliveries',
      'listWebhookEndpoints',
      'recoverWebhookEndpoint',
      'retryWebhookDelivery',
      'rotateWebhookEndpointSecret',
      'updateWebhookEndpoint',
    ]);
  });

  test('when the service signs a body, then the reference library verifies it, with one secret or the other of a rotation, and refuses an altered body', () => {
    const [a, b] = [Buffer.alloc(32, 7), Buffer.alloc(32, 9)].map(
      (bytes) => `whsec_${bytes.toString('base64')}`,
    ) as [string, string];
    const timestamp = Math.floor(Date.now() / 1000);
    const body = '{"id":12,"type":"pet.created"}';
    const headers = {
      'webhook-id': '12',
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatureHeader([a, b], '12', timestamp, body),
    };
    assert.deepEqual(new Webhook(a).verify(body, headers), JSON.parse(body));
    assert.deepEqual(new Webhook(b).verify(body, headers), JSON.parse(body));
    assert.throws(() => new Webhook(a).verify(body.replace('12', '13'), headers));
    assert.throws(() => new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(body, headers));
  });
});
