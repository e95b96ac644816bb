import assert from 'node:assert/strict';
import { after, backends, before, test } from '../support/backends.js';
import { poll } from '../support/cli.js';
import { queryDatabase } from '../support/db-inspect.js';
import { assertError } from '../support/error-body.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * POST /v1/webhook-endpoints/{id}/recover after a receiver's outage: each delivery that ended `failed` in
 * the window is attempted once more, in event order; those that succeeded are not sent again. One
 * attempt at a time per endpoint here, so the order the receiver sees is the order they were started in.
 */

interface DeliveryBody {
  eventId: number;
  status: 'pending' | 'succeeded' | 'failed';
  attempts: number;
}

const ENV = {
  WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
  WEBHOOK_RETRY_SCHEDULE: '1ms',
  WEBHOOK_CONCURRENCY_PER_ENDPOINT: '1',
};

for (const backend of backends) {
  backend.describe(`recovering an endpoint's failed deliveries (${backend.name})`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    before(async () => {
      receiver = await WebhookReceiver.start();
      server = await startTestServer({ backend, env: ENV });
    });
    after(async () => {
      await server.close();
      await receiver.close();
    });

    const register = async (path: string) => {
      const res = await server.request('POST', '/v1/webhook-endpoints', {
        body: { url: receiver.url(path), types: ['pet.created'] },
      });
      assert.equal(res.status, 201, res.text);
      return res.json<{ id: number }>().id;
    };
    const deliveries = async (endpointId: number) =>
      (await server.request('GET', `/v1/webhook-endpoints/${endpointId}/deliveries?limit=100`)).json<
        DeliveryBody[]
      >();
    const recover = (endpointId: number, body: unknown) =>
      server.request('POST', `/v1/webhook-endpoints/${endpointId}/recover`, { body });
    const createPet = async (name: string) => {
      const res = await server.request('POST', '/v1/pets', { body: { name, categoryId: 1 } });
      assert.equal(res.status, 201, res.text);
    };

    test('when a receiver was down (every delivery failed) and is back, then recover since the outage sends each failed delivery exactly once more, in event order, and none that had succeeded; a second recover while it runs is 409', async () => {
      const since = new Date(Date.now() - 1_000).toISOString();
      let down = false;
      let release: () => void = () => undefined;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      receiver.answer(async (request) => {
        if (request.path !== '/outage') return { status: 204 };
        if (down) return { status: 503, body: 'down for maintenance' };
        if (JSON.parse(request.body).data.name.startsWith('lost')) await held;
        return { status: 204 };
      });
      const endpoint = await register('/outage');
      await createPet('before the outage');
      await poll('the first delivery to succeed', async () =>
        (await deliveries(endpoint))[0]?.status === 'succeeded' ? true : undefined,
      );
      down = true;
      for (let i = 0; i < 5; i++) await createPet(`lost ${i}`);
      const failed = await poll('five deliveries to fail (1 + the schedule: 2 attempts each)', async () => {
        const list = await deliveries(endpoint);
        return list.filter((d) => d.status === 'failed').length === 5 ? list : undefined;
      });
      assert.ok(failed.every((d) => d.status === 'succeeded' || d.attempts === 2));
      const lost = failed
        .filter((d) => d.status === 'failed')
        .map((d) => d.eventId)
        .sort((a, b) => a - b);
      const sentBefore = receiver.received.length;

      down = false;
      const started = await recover(endpoint, { since });
      assert.equal(started.status, 202, started.text);
      assert.deepEqual(started.json(), { queued: 5 });
      // The first recovered attempt is held by the receiver: the recovery is still under way.
      assertError(
        await recover(endpoint, { since }),
        409,
        'conflict',
        'a recovery of this webhook endpoint is under way: wait for it to end',
      );
      release();
      const after = await poll('the five to succeed', async () => {
        const list = await deliveries(endpoint);
        return list.every((d) => d.status === 'succeeded') ? list : undefined;
      });
      assert.equal(after.length, 6);
      const resent = receiver.received.slice(sentBefore).map((r) => Number(r.headers['webhook-id']));
      assert.deepEqual(resent, lost, 'each failed delivery once more, in event order, and nothing else');
      const [attempt] = (
        await server.request(
          'GET',
          `/v1/webhook-endpoints/${endpoint}/deliveries/${lost[0]}/attempts?limit=100`,
        )
      )
        .json<{ number: number; trigger: string; responseStatus: number }[]>()
        .slice(-1);
      assert.deepEqual(
        { number: attempt?.number, trigger: attempt?.trigger, responseStatus: attempt?.responseStatus },
        { number: 3, trigger: 'recover', responseStatus: 204 },
      );
      // Over: nothing failed is left, and another recovery may start (it has nothing to do).
      const again = await poll('the recovery to end', async () => {
        const res = await recover(endpoint, { since });
        return res.status === 202 ? res : undefined;
      });
      assert.deepEqual(again.json(), { queued: 0 });
      const rows = await queryDatabase(server.database.url, 'SELECT endpoint_id FROM webhook_recoveries');
      assert.equal(rows.length, 0, 'no recovery left under way');
    });

    test('when a recovered attempt fails, then it is failed again, with no retry schedule after it', async () => {
      const since = new Date(Date.now() - 1_000).toISOString();
      receiver.answer((request) => (request.path === '/still-down' ? { status: 500 } : { status: 204 }));
      const endpoint = await register('/still-down');
      await createPet('never delivered');
      const [failed] = await poll('the delivery to fail', async () => {
        const list = await deliveries(endpoint);
        return list[0]?.status === 'failed' ? list : undefined;
      });
      assert.deepEqual((await recover(endpoint, { since })).json(), { queued: 1 });
      const [once] = await poll('the recovered attempt to be recorded', async () => {
        const list = await deliveries(endpoint);
        return list[0]?.attempts === 3 && list[0].status === 'failed' ? list : undefined;
      });
      assert.equal(once?.eventId, failed?.eventId);
      assert.equal(once?.attempts, 3, 'two, then one recovered: no further schedule');
    });

    test('when a recover is sent again with the same Idempotency-Key, then the first answer comes back (Idempotent-Replayed) and nothing is recovered twice; the key with another window is 422', async () => {
      const since = new Date(Date.now() - 1_000).toISOString();
      receiver.answer((request) => (request.path === '/idempotent' ? { status: 500 } : { status: 204 }));
      const endpoint = await register('/idempotent');
      await createPet('first');
      await createPet('second');
      await poll('both deliveries to fail', async () => {
        const list = await deliveries(endpoint);
        return list.length === 2 && list.every((d) => d.status === 'failed') ? list : undefined;
      });
      const send = (body: unknown) =>
        server.request('POST', `/v1/webhook-endpoints/${endpoint}/recover`, {
          body,
          headers: { 'idempotency-key': 'recover-after-outage-1' },
        });
      const first = await send({ since });
      assert.equal(first.status, 202, first.text);
      assert.deepEqual(first.json(), { queued: 2 });
      assert.equal(first.headers.get('idempotent-replayed'), null);
      const again = await send({ since });
      assert.equal(again.status, 202, again.text);
      assert.deepEqual(again.json(), { queued: 2 });
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assertError(
        await send({ since: new Date(Date.now() - 2_000).toISOString() }),
        422,
        'idempotency_key_reused',
      );
      await poll('the recovery to end', async () =>
        (await queryDatabase(server.database.url, 'SELECT 1 FROM webhook_recoveries')).length === 0
          ? true
          : undefined,
      );
      const after = await deliveries(endpoint);
      assert.deepEqual(
        after.map((d) => [d.status, d.attempts]),
        [
          ['failed', 3],
          ['failed', 3],
        ],
        'one recovered attempt each, not two',
      );
    });

    test('when the window or the endpoint is wrong, then 400 naming since or until, 404, or 409 for a disabled endpoint, and nothing is recovered', async () => {
      receiver.answer((request) => (request.path === '/gone' ? { status: 410 } : { status: 204 }));
      const endpoint = await register('/bad-input');
      const day = 24 * 60 * 60 * 1000;
      const iso = (ms: number) => new Date(Date.now() + ms).toISOString();
      const cases: [unknown, string][] = [
        [{}, 'since'],
        [{ since: iso(60_000) }, 'since'],
        [{ since: iso(-31 * day) }, 'since'],
        [{ since: 'yesterday' }, 'since'],
        [{ since: '2026-11-23 09:00:00Z' }, 'since'],
        [{ since: '2026-11-23T09:00:00' }, 'since'],
        [{ since: '2026-02-30T09:00:00Z' }, 'since'],
        [{ since: 1_795_000_000 }, 'since'],
        [{ since: iso(-60_000), until: iso(-120_000) }, 'until'],
        [{ since: '2026-12-01T00:00:00.000Z', until: '2026-12-01T00:00:00.000Z' }, 'until'],
        [{ since: iso(-60_000), until: '2026-13-01T00:00:00Z' }, 'until'],
        [{ since: iso(-60_000), status: 'failed' }, 'status'],
      ];
      for (const [body, field] of cases)
        assertError(
          await recover(endpoint, body),
          400,
          'invalid_request',
          { names: [field] },
          JSON.stringify(body),
        );
      assertError(await recover(999_999, { since: iso(-60_000) }), 404, 'not_found');
      const gone = await register('/gone');
      await createPet('disables /gone');
      await poll('the endpoint to be disabled', async () =>
        (await server.request('GET', `/v1/webhook-endpoints/${gone}`)).json<{ status: string }>().status ===
        'disabled'
          ? true
          : undefined,
      );
      assertError(
        await recover(gone, { since: iso(-60_000) }),
        409,
        'conflict',
        'this webhook endpoint is disabled: enable it first',
      );
      const rows = await queryDatabase(server.database.url, 'SELECT endpoint_id FROM webhook_recoveries');
      assert.equal(rows.length, 0, 'nothing recovered');
      const [delivery] = await deliveries(gone);
      assert.equal(delivery?.status, 'failed', 'left as it was');
    });
  });
}
