import assert from 'node:assert/strict';
import {
  type Event,
  PetstoreClient,
  PetstoreError,
  verifyWebhook,
  WebhookVerificationError,
} from '../../packages/client/src/index.js';
import { after, backends, before, test } from '../support/backends.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

/** The typed client's events and webhooks: the feed as an iterator that resumes, endpoints, and verifyWebhook. */
for (const backend of backends) {
  backend.describe(`typed client: events and webhooks (${backend.name})`, () => {
    let server: TestServer;
    let client: PetstoreClient;
    let receiver: WebhookReceiver;
    before(async () => {
      receiver = await WebhookReceiver.start();
      server = await startTestServer({ backend, env: { WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' } });
      client = new PetstoreClient({ baseUrl: `${server.url}/v1`, apiKey: TEST_KEY });
    });
    after(async () => {
      await server.close();
      await receiver.close();
    });

    test('when listAllEvents walks the feed in small pages and later resumes from the last id, then it yields every event once, in order, int64 exact', async () => {
      for (let i = 0; i < 5; i++)
        await client.createPet({ name: `feed ${i}`, categoryId: 2n ** 62n + BigInt(i) });
      const first: Event[] = [];
      for await (const event of client.listAllEvents({ limit: 2 })) first.push(event);
      assert.ok(first.length >= 5);
      assert.ok(first.every((e, i) => i === 0 || e.id > (first[i - 1] as Event).id));
      const last = first[first.length - 1] as Event;
      assert.equal(typeof last.id, 'bigint');
      assert.equal((last.data as { categoryId: bigint }).categoryId, 2n ** 62n + 4n);
      const pet = await client.createPet({ name: 'after resuming', categoryId: 1 });
      const order = await client.placeOrder({ petId: pet.id });
      const resumed: Event[] = [];
      for await (const event of client.listAllEvents({
        after: last.id as bigint,
        type: ['order.placed', 'pet.created'],
      }))
        resumed.push(event);
      assert.deepEqual(
        resumed.map((e) => [e.type, (e.data as { id: bigint }).id]),
        [
          ['pet.created', pet.id],
          ['order.placed', order.id],
        ],
      );
      assert.deepEqual(await client.getEvent(resumed[0]?.id as bigint), resumed[0]);
    });

    test('when an endpoint is managed through the client and a delivery arrives, then verifyWebhook returns the Event and refuses it altered or with another secret', async () => {
      const endpoint = await client.createWebhookEndpoint({
        url: receiver.url('/client'),
        types: ['pet.created'],
      });
      assert.match(endpoint.secret, /^whsec_/);
      assert.equal((await client.getWebhookEndpoint(endpoint.id)).url, receiver.url('/client'));
      const listed = await client.listWebhookEndpoints({ limit: 100 });
      assert.ok(listed.endpoints.some((e) => e.id === endpoint.id));
      const pet = await client.createPet({ name: 'verified', categoryId: 2n ** 63n - 1n });
      const [request] = await receiver.waitFor(1, '/client');
      assert.ok(request);
      const event = verifyWebhook(endpoint.secret, request.headers as Record<string, string>, request.body);
      assert.equal(event.type, 'pet.created');
      assert.deepEqual(event.data, pet);
      assert.throws(
        () =>
          verifyWebhook(
            endpoint.secret,
            request.headers as Record<string, string>,
            request.body.replace('verified', 'forged'),
          ),
        WebhookVerificationError,
      );
      const rotated = await client.rotateWebhookEndpointSecret(endpoint.id);
      assert.throws(
        () => verifyWebhook(rotated.secret, request.headers as Record<string, string>, request.body),
        WebhookVerificationError,
      );
      const { deliveries } = await client.listWebhookDeliveries(endpoint.id);
      assert.equal(deliveries[0]?.eventId, event.id);
      const retried = await client.retryWebhookDelivery(endpoint.id, event.id as bigint);
      assert.equal(retried.status, 'pending');
      assert.equal((await client.enableWebhookEndpoint(endpoint.id)).status, 'enabled');
      await client.deleteWebhookEndpoint(endpoint.id);
      await assert.rejects(client.getWebhookEndpoint(endpoint.id), (error: unknown) => {
        assert.ok(error instanceof PetstoreError);
        assert.equal(error.status, 404);
        return true;
      });
      await assert.rejects(client.deleteWebhookEndpoint(endpoint.id), PetstoreError);
    });
  });
}
