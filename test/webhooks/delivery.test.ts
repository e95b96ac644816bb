import assert from 'node:assert/strict';
import { after, backends, before, test } from '../support/backends.js';
import { poll } from '../support/cli.js';
import { queryDatabase } from '../support/db-inspect.js';
import { assertError } from '../support/error-body.js';
import { captureLog } from '../support/log-capture.js';
import { nextHref, toPath, walkLinks } from '../support/paging.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { type Answer, verified, WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * Webhook delivery, end to end: the real service POSTs to a real receiver on 127.0.0.1 (let in with
 * WEBHOOK_ALLOWED_NETWORKS), signatures are checked with the reference library (standardwebhooks),
 * and the retry schedule is in milliseconds so a test sees every attempt.
 */

interface DeliveryBody {
  eventId: number;
  status: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  lastAttemptAt: string | null;
  nextAttemptAt: string | null;
  lastResponseStatus: number | null;
  lastError: string | null;
}

interface Endpoint {
  id: number;
  secret: string;
  status: string;
}

const FAST = {
  WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
  WEBHOOK_RETRY_SCHEDULE: '50ms,50ms',
  WEBHOOK_TIMEOUT_MS: '400',
};

for (const backend of backends) {
  backend.describe(`webhook delivery (${backend.name})`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    const { lines: logLines, logger } = captureLog('info');
    before(async () => {
      receiver = await WebhookReceiver.start();
      server = await startTestServer({ backend, env: FAST, logger });
    });
    after(async () => {
      await server.close();
      await receiver.close();
    });

    const register = async (
      path: string,
      body: Record<string, unknown> = {},
      on = server,
    ): Promise<Endpoint> => {
      const res = await on.request('POST', '/v1/webhook-endpoints', {
        body: { url: receiver.url(path), ...body },
      });
      assert.equal(res.status, 201, res.text);
      return res.json<Endpoint>();
    };
    const createPet = async (name = 'hooked', on = server) => {
      const res = await on.request('POST', '/v1/pets', { body: { name, categoryId: 3 } });
      assert.equal(res.status, 201, res.text);
      return res.json<{ id: number }>();
    };
    const deliveries = async (endpoint: Endpoint, on = server) => {
      const res = await on.request('GET', `/v1/webhook-endpoints/${endpoint.id}/deliveries?limit=100`);
      assert.equal(res.status, 200, res.text);
      return res.json<DeliveryBody[]>();
    };
    /** Waits (poll's safety bound, not a timing assertion) until the endpoint's deliveries satisfy `done`. */
    const settle = (endpoint: Endpoint, done: (d: DeliveryBody[]) => boolean, on = server) =>
      poll('the deliveries to settle', async () => {
        const list = await deliveries(endpoint, on);
        return done(list) ? list : undefined;
      });
    const answerOn = (path: string, answer: (n: number) => Answer) => {
      let n = 0;
      const previous = new Map<string, (n: number) => Answer>();
      previous.set(path, answer);
      receiver.answer((request) => (request.path === path ? answer(++n) : { status: 204 }));
    };

    test('when a pet is created, then the endpoint gets one POST: Standard Webhooks headers that the reference library verifies, the Event exactly as getEvent returns it', async () => {
      const endpoint = await register('/signed');
      const before = Date.now();
      const pet = await createPet('Signed');
      const [request] = await receiver.waitFor(1, '/signed');
      assert.ok(request);
      const event = verified(endpoint.secret, request);
      assert.equal(event.type, 'pet.created');
      assert.deepEqual(event.data, { id: pet.id, name: 'Signed', categoryId: 3, status: 'available' });
      assert.equal(request.headers['webhook-id'], String(event.id));
      assert.match(request.headers['webhook-timestamp'] as string, /^\d{10}$/);
      assert.ok(Math.abs(Number(request.headers['webhook-timestamp']) - Date.now() / 1000) < 300);
      assert.match(request.headers['webhook-signature'] as string, /^v1,[A-Za-z0-9+/]{43}=$/);
      assert.equal(request.headers['content-type'], 'application/json');
      assert.match(request.headers['user-agent'] as string, /^animal-store-webhooks\/\d+\.\d+\.\d+$/);
      const asListed = await server.request('GET', `/v1/events/${event.id}`);
      assert.equal(request.body, asListed.text, 'the body is the event as getEvent returns it');
      // A wrong secret does not verify: the check is real.
      assert.throws(() => verified(`whsec_${Buffer.alloc(32, 1).toString('base64')}`, request));
      const [delivery] = await settle(endpoint, (d) => d[0]?.status === 'succeeded');
      // When the attempt was made: after the create, before the listing.
      const attemptedAt = Date.parse(delivery?.lastAttemptAt as string);
      assert.ok(attemptedAt >= before && attemptedAt <= Date.now(), String(delivery?.lastAttemptAt));
      assert.deepEqual(
        { ...delivery, lastAttemptAt: null },
        {
          eventId: event.id,
          status: 'succeeded',
          attempts: 1,
          lastAttemptAt: null,
          nextAttemptAt: null,
          lastResponseStatus: 204,
          lastError: null,
        },
      );
    });

    test('when an endpoint has types, then it gets only events of those types, and only those that occur after it was created', async () => {
      await createPet('before the endpoint');
      const endpoint = await register('/orders-only', { types: ['order.placed'] });
      const pet = await createPet('ordered');
      const order = await server.request('POST', '/v1/store/orders', { body: { petId: pet.id } });
      assert.equal(order.status, 201);
      const [request] = await receiver.waitFor(1, '/orders-only');
      assert.ok(request);
      const event = verified(endpoint.secret, request);
      assert.equal(event.type, 'order.placed');
      assert.deepEqual(event.data, order.json());
      const list = await settle(endpoint, (d) => d.every((x) => x.status === 'succeeded'));
      assert.deepEqual(
        list.map((d) => d.eventId),
        [event.id],
        'one delivery: no pet.created, nothing from before',
      );
    });

    test('when the receiver answers 500 then 200, then the delivery is attempted again after the schedule and succeeds on the second attempt with the same webhook-id', async () => {
      answerOn('/flaky', (n) => (n === 1 ? { status: 500, body: 'try later' } : { status: 200 }));
      const endpoint = await register('/flaky');
      await createPet();
      const requests = await receiver.waitFor(2, '/flaky');
      assert.equal(requests[0]?.headers['webhook-id'], requests[1]?.headers['webhook-id']);
      for (const request of requests) verified(endpoint.secret, request);
      const [delivery] = await settle(endpoint, (d) => d[0]?.status === 'succeeded');
      assert.equal(delivery?.attempts, 2);
      assert.equal(delivery?.lastResponseStatus, 200);
      assert.equal(delivery?.lastError, null);
    });

    test('when every attempt fails (a 503 with a long body), then after 1 + the schedule attempts the delivery is failed, lastError keeps at most 1 KiB of the answer, and one log line says so', async () => {
      answerOn('/down', () => ({ status: 503, body: 'x'.repeat(5000) }));
      const endpoint = await register('/down');
      await createPet();
      const [delivery] = await settle(endpoint, (d) => d[0]?.status === 'failed');
      assert.equal(delivery?.attempts, 3, 'one attempt and one per delay of 50ms,50ms');
      assert.equal(delivery?.lastResponseStatus, 503);
      assert.equal(delivery?.lastError, `HTTP 503: ${'x'.repeat(1024)}`);
      assert.equal(delivery?.nextAttemptAt, null);
      assert.equal((await receiver.waitFor(3, '/down')).length, 3);
      const line = logLines.find(
        (l) => l.msg === 'webhook delivery failed: no attempt left' && l.endpointId === String(endpoint.id),
      );
      assert.equal(line?.level, 40);
      assert.equal(line?.attempts, 3);
    });

    test('when the receiver is slow past WEBHOOK_TIMEOUT_MS, resets the connection, redirects, or is not listening, then each attempt fails with what happened, and a redirect is never followed', async () => {
      const cases: [string, Answer, RegExp][] = [
        ['/slow', { hang: true }, /^no answer within 400 ms$/],
        ['/reset', { reset: true }, /^connection reset$/],
        ['/redirect', { status: 302, headers: { location: '/redirected' } }, /^HTTP 302/],
      ];
      receiver.answer((request) => cases.find(([path]) => path === request.path)?.[1] ?? { status: 204 });
      for (const [path, , error] of cases) {
        const endpoint = await register(path);
        await createPet(path);
        const [delivery] = await settle(endpoint, (d) => d[0]?.status === 'failed');
        assert.match(delivery?.lastError ?? '', error, path);
        assert.equal(delivery?.attempts, 3);
      }
      assert.equal(
        receiver.received.filter((r) => r.path === '/redirected').length,
        0,
        'redirect not followed',
      );
      // Nobody listening on the port: refused.
      const closed = await WebhookReceiver.start();
      const url = closed.url('/gone-away');
      await closed.close();
      const res = await server.request('POST', '/v1/webhook-endpoints', { body: { url } });
      const endpoint = res.json<Endpoint>();
      await createPet('nobody home');
      const [delivery] = await settle(endpoint, (d) => d[0]?.status === 'failed');
      assert.equal(delivery?.lastError, 'connection refused');
      assert.equal(delivery?.lastResponseStatus, null);
    });

    test('when the receiver answers 410, then the endpoint is disabled at once ("gone"), logged, and gets nothing more until enabled; then only events after that', async () => {
      answerOn('/gone', () => ({ status: 410 }));
      const endpoint = await register('/gone');
      await createPet('first');
      await poll('the endpoint to be disabled', async () => {
        const got = await server.request('GET', `/v1/webhook-endpoints/${endpoint.id}`);
        return got.json<{ status: string }>().status === 'disabled' ? got : undefined;
      });
      const got = (await server.request('GET', `/v1/webhook-endpoints/${endpoint.id}`)).json<{
        failingSince: string | null;
      }>();
      assert.deepEqual(
        { ...(got as object), createdAt: '', failingSince: '' },
        {
          id: endpoint.id,
          url: receiver.url('/gone'),
          types: ['*'],
          description: '',
          rateLimit: null,
          status: 'disabled',
          disabledReason: 'gone',
          createdAt: '',
          lastSuccessAt: null,
          failingSince: '',
        },
      );
      const [first] = await deliveries(endpoint);
      assert.equal(first?.status, 'failed');
      assert.equal(first?.attempts, 1);
      assert.equal(got.failingSince, first?.lastAttemptAt, 'failing since its one attempt');
      assert.ok(
        logLines.some(
          (l) =>
            l.msg === 'webhook endpoint disabled' &&
            l.endpointId === String(endpoint.id) &&
            l.reason === 'gone',
        ),
      );
      const missed = await createPet('while disabled');
      answerOn('/gone', () => ({ status: 200 }));
      const enabled = await server.request('POST', `/v1/webhook-endpoints/${endpoint.id}/enable`);
      assert.deepEqual(Object.keys(enabled.json() as object).includes('disabledReason'), false);
      const later = await createPet('after enabling');
      const requests = await receiver.waitFor(2, '/gone');
      assert.ok(requests[1]);
      const event = verified(endpoint.secret, requests[1]);
      assert.equal(event.data.id, later.id);
      assert.notEqual(event.data.id, missed.id);
      const list = await settle(endpoint, (d) => d.length === 2 && d[0]?.status === 'succeeded');
      assert.equal(list.length, 2, 'nothing for the event that occurred while it was disabled');
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      assert.match(metrics, /^petstore_webhook_endpoints_disabled_total\{reason="gone"\} [1-9]\d*$/m);
      assert.match(metrics, /^petstore_webhook_attempts_total\{outcome="succeeded"\} [1-9]\d*$/m);
      assert.match(metrics, /^petstore_webhook_attempts_total\{outcome="failed"\} [1-9]\d*$/m);
      assert.match(metrics, /^petstore_webhook_attempt_duration_seconds_count [1-9]\d*$/m);
      assert.match(metrics, /^petstore_webhook_deliveries_pending \d+$/m);
      assert.match(metrics, /^petstore_webhook_oldest_pending_age_seconds [\d.e+-]+$/m);
    });

    test('when a secret is rotated, then deliveries carry two signatures, one verifying with the new secret and one with the previous', async () => {
      const endpoint = await register('/rotated');
      const rotated = await server.request('POST', `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`);
      const fresh = rotated.json<Endpoint>().secret;
      await createPet('rotated');
      const [request] = await receiver.waitFor(1, '/rotated');
      assert.ok(request);
      const signatures = (request.headers['webhook-signature'] as string).split(' ');
      assert.equal(signatures.length, 2);
      // Each secret's own signature: alone in the header, it verifies with its secret and not the other's.
      for (const [secret, other, signature] of [
        [fresh, endpoint.secret, signatures[0]],
        [endpoint.secret, fresh, signatures[1]],
      ] as const) {
        const alone = { ...request, headers: { ...request.headers, 'webhook-signature': signature } };
        verified(secret, alone);
        assert.throws(() => verified(other, alone));
      }
    });

    test('when a delivery failed, then retry answers 202 with it pending and it is attempted again at once', async () => {
      answerOn('/retry', () => ({ status: 500 }));
      const endpoint = await register('/retry');
      await createPet('retried');
      const [failed] = await settle(endpoint, (d) => d[0]?.status === 'failed');
      answerOn('/retry', () => ({ status: 200 }));
      const res = await server.request(
        'POST',
        `/v1/webhook-endpoints/${endpoint.id}/deliveries/${failed?.eventId}/retry`,
      );
      assert.equal(res.status, 202, res.text);
      assert.equal(res.json<DeliveryBody>().status, 'pending');
      const [delivery] = await settle(endpoint, (d) => d[0]?.status === 'succeeded');
      assert.equal(delivery?.attempts, 4);
      assert.equal(delivery?.lastResponseStatus, 200);
    });

    test('when a delivery has failed in several ways and is retried, then its attempts are listed oldest first with status, answer, error, duration and trigger, paged; no signature or secret is kept; bad input is refused', async () => {
      answerOn('/attempts', (n) =>
        n === 1
          ? { status: 500, body: '<img src=x onerror=alert(1)>' }
          : n === 2
            ? { reset: true }
            : n === 3
              ? { status: 503, body: 'y'.repeat(5000) }
              : { status: 200 },
      );
      const endpoint = await register('/attempts');
      await createPet('attempted');
      const [failed] = await settle(endpoint, (d) => d[0]?.status === 'failed');
      const retried = await server.request(
        'POST',
        `/v1/webhook-endpoints/${endpoint.id}/deliveries/${failed?.eventId}/retry`,
      );
      assert.equal(retried.status, 202, retried.text);
      await settle(endpoint, (d) => d[0]?.status === 'succeeded');
      const path = `/v1/webhook-endpoints/${endpoint.id}/deliveries/${failed?.eventId}/attempts`;
      interface AttemptBody {
        number: number;
        startedAt: string;
        durationMs: number;
        responseStatus: number | null;
        responseBody: string | null;
        error: string | null;
        trigger: string;
      }
      const all = await server.request('GET', path);
      assert.equal(all.status, 200, all.text);
      const attempts = all.json<AttemptBody[]>();
      assert.deepEqual(
        attempts.map(({ number, responseStatus, responseBody, error, trigger }) => ({
          number,
          responseStatus,
          responseBody,
          error,
          trigger,
        })),
        [
          {
            number: 1,
            responseStatus: 500,
            responseBody: '<img src=x onerror=alert(1)>',
            error: null,
            trigger: 'schedule',
          },
          {
            number: 2,
            responseStatus: null,
            responseBody: null,
            error: 'connection reset',
            trigger: 'schedule',
          },
          {
            number: 3,
            responseStatus: 503,
            responseBody: 'y'.repeat(1024),
            error: null,
            trigger: 'schedule',
          },
          { number: 4, responseStatus: 200, responseBody: '', error: null, trigger: 'retry' },
        ],
      );
      for (const attempt of attempts) {
        assert.ok(
          Number.isInteger(attempt.durationMs) && attempt.durationMs >= 0,
          String(attempt.durationMs),
        );
        assert.match(attempt.startedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      }
      const starts = attempts.map((a) => Date.parse(a.startedAt));
      assert.deepEqual(
        starts,
        [...starts].sort((a, b) => a - b),
      );
      // Paged like every list.
      const first = await server.request('GET', `${path}?limit=3`);
      assert.equal(first.json<AttemptBody[]>().length, 3);
      const next = nextHref(first);
      assert.ok(next, 'a next link');
      const second = await server.request('GET', toPath(next));
      assert.deepEqual(
        second.json<AttemptBody[]>().map((a) => a.number),
        [4],
      );
      assert.equal(second.headers.get('link'), null);
      // What was sent is not kept: neither the secret nor a signature.
      const rows = JSON.stringify(await queryDatabase(server.database.url, 'SELECT * FROM webhook_attempts'));
      assert.doesNotMatch(rows, new RegExp(endpoint.secret.slice(6, 30).replace(/[+/]/g, '\\$&')));
      assert.doesNotMatch(rows, /v1,[A-Za-z0-9+/]{20}/);
      // Bad input.
      assertError(await server.request('GET', `${path}?limit=0`), 400, 'invalid_request', /limit/);
      assertError(await server.request('GET', `${path}?cursor=forged`), 400, 'invalid_request', /cursor/);
      assertError(
        await server.request('GET', `${path}?after=1`),
        400,
        'invalid_request',
        /after is not a known parameter/,
      );
      assertError(
        await server.request('GET', `/v1/webhook-endpoints/${endpoint.id}/deliveries/abc/attempts`),
        400,
        'invalid_request',
        /eventId/,
      );
      assertError(
        await server.request('GET', `/v1/webhook-endpoints/${endpoint.id}/deliveries/999999/attempts`),
        404,
        'not_found',
      );
      assertError(
        await server.request('GET', `/v1/webhook-endpoints/999999/deliveries/${failed?.eventId}/attempts`),
        404,
        'not_found',
      );
    });

    test('when deliveries are listed, then newest event first, filtered by status, paged with rel="next" keeping the filter, a bad cursor refused', async () => {
      // Events of odd ids succeed, those of even ids fail every attempt (400, not 410, which would
      // disable): decided by the event, not by the order attempts happen to arrive in, so both kinds exist.
      receiver.answer((request) =>
        request.path !== '/listed'
          ? { status: 204 }
          : { status: Number(request.headers['webhook-id']) % 2 === 1 ? 200 : 400 },
      );
      const endpoint = await register('/listed');
      const serverWithOneTry = endpoint; // the schedule still applies: failures are retried, then failed
      for (let i = 0; i < 5; i++) await createPet(`listed ${i}`);
      const all = await settle(
        serverWithOneTry,
        (d) => d.length === 5 && d.every((x) => x.status !== 'pending'),
      );
      const ids = all.map((d) => d.eventId);
      assert.deepEqual(
        [...ids].sort((a, b) => b - a),
        ids,
        'newest event first',
      );
      const pages = await walkLinks(`/v1/webhook-endpoints/${endpoint.id}/deliveries?limit=2`, (path) =>
        server.request('GET', path),
      );
      assert.deepEqual(
        pages.map((p) => p.json<DeliveryBody[]>().length),
        [2, 2, 1],
      );
      assert.deepEqual(
        pages.flatMap((p) => p.json<DeliveryBody[]>().map((d) => d.eventId)),
        ids,
      );
      for (const status of ['succeeded', 'failed'] as const) {
        const filtered = await walkLinks(
          `/v1/webhook-endpoints/${endpoint.id}/deliveries?limit=1&status=${status}`,
          (path) => server.request('GET', path),
        );
        const got = filtered.flatMap((p) => p.json<DeliveryBody[]>());
        assert.deepEqual(
          got.map((d) => d.eventId),
          all.filter((d) => d.status === status).map((d) => d.eventId),
        );
        assert.ok(got.length > 0, status);
        for (const page of filtered.slice(0, -1))
          assert.match(page.headers.get('link') ?? '', new RegExp(`&status=${status}&`));
      }
      const first = await server.request('GET', `/v1/webhook-endpoints/${endpoint.id}/deliveries?limit=1`);
      const cursor = new URL(`http://x${toPath(nextHref(first) as string)}`).searchParams.get('cursor');
      assertError(
        await server.request(
          'GET',
          `/v1/webhook-endpoints/${endpoint.id}/deliveries?limit=1&status=failed&cursor=${cursor}`,
        ),
        400,
        'invalid_request',
        'cursor does not belong to these filters',
      );
    });

    test('when a delivery is retried while an attempt is under way, then it answers 202 but no second attempt runs beside the first', async () => {
      answerOn('/in-flight', () => ({ hang: true }));
      const endpoint = await register('/in-flight');
      await createPet('in flight');
      const [held] = await receiver.waitFor(1, '/in-flight');
      const res = await server.request(
        'POST',
        `/v1/webhook-endpoints/${endpoint.id}/deliveries/${held?.headers['webhook-id']}/retry`,
      );
      assert.equal(res.status, 202, res.text);
      // Time for a second attempt to start, were it allowed, well within the first's 400 ms timeout.
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(receiver.received.filter((r) => r.path === '/in-flight').length, 1);
    });

    test('when an endpoint with pending deliveries is deleted, then its deliveries are dropped', async () => {
      answerOn('/deleted', () => ({ hang: true }));
      const endpoint = await register('/deleted');
      await createPet('dropped');
      await receiver.waitFor(1, '/deleted');
      assert.equal((await server.request('DELETE', `/v1/webhook-endpoints/${endpoint.id}`)).status, 204);
      const rows = await queryDatabase(
        server.database.url,
        `SELECT event_id FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id}`,
      );
      assert.deepEqual(rows, []);
    });

    test('when a receiver holds every request, then at most WEBHOOK_CONCURRENCY_PER_ENDPOINT (4) are attempted at once, /readyz still answers, and every delivery arrives once it answers', async (t) => {
      // A server of its own whose attempts outlast the hold: at FAST's 400 ms a held attempt would time
      // out and be retried while the test looks, a fifth request that is no breach of the bound.
      const holding = await startTestServer({
        backend,
        env: { ...FAST, WEBHOOK_TIMEOUT_MS: '120000' },
        logger,
      });
      t.after(() => holding.close());
      let release!: () => void;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      receiver.answer(async (request) => {
        if (request.path !== '/held') return { status: 204 };
        await released;
        return { status: 200 };
      });
      const endpoint = await register('/held', {}, holding);
      for (let i = 0; i < 10; i++) await createPet(`held ${i}`, holding);
      await receiver.waitFor(4, '/held');
      const ready = await fetch(`${holding.url}/readyz`);
      assert.equal(ready.status, 200);
      assert.equal(
        receiver.received.filter((r) => r.path === '/held').length,
        4,
        'no fifth while four are held',
      );
      release();
      const list = await settle(
        endpoint,
        (d) => d.length === 10 && d.every((x) => x.status === 'succeeded'),
        holding,
      );
      assert.equal(list.length, 10);
      assert.equal(receiver.maxConcurrent.get('/held'), 4, 'four at once, never more');
    });
  });

  backend.describe(`webhook delivery, private networks and disabling (${backend.name})`, () => {
    let receiver: WebhookReceiver;
    before(async () => {
      receiver = await WebhookReceiver.start();
    });
    after(() => receiver.close());

    test('when a host name resolves to 127.0.0.1 and no network is allowed, then the endpoint can be created but gets no request; lastError says it was refused', async () => {
      const server = await startTestServer({
        backend,
        env: { WEBHOOK_RETRY_SCHEDULE: '50ms', WEBHOOK_TIMEOUT_MS: '400' },
      });
      try {
        const created = await server.request('POST', '/v1/webhook-endpoints', {
          body: { url: receiver.url('/ssrf', 'localhost') },
        });
        assert.equal(created.status, 201, created.text);
        const endpoint = created.json<Endpoint>();
        await server.request('POST', '/v1/pets', { body: { name: 'ssrf', categoryId: 1 } });
        const [delivery] = await poll('the attempts to fail', async () => {
          const list = (await server.request('GET', `/v1/webhook-endpoints/${endpoint.id}/deliveries`)).json<
            DeliveryBody[]
          >();
          return list[0]?.status === 'failed' ? list : undefined;
        });
        assert.equal(delivery?.attempts, 2);
        assert.equal(delivery?.lastError, 'refused: localhost resolves to no public address');
        assert.equal(receiver.received.length, 0, 'no request reached the private address');
      } finally {
        await server.close();
      }
    });

    /**
     * A service whose clock runs and moves a minute at each attempt the receiver answers (`minutePassed`):
     * attempt n is recorded at minute n. A minute is less than a lease (WEBHOOK_TIMEOUT_MS + 5 s), so a
     * jump never ends the lease of the attempt under way and no claim made meanwhile takes it again.
     * Four retries, 1 ms apart; disabled after 150 s of failures.
     */
    const startFailingSpellServer = async () => {
      let offset = 0;
      const server = await startTestServer({
        backend,
        now: () => new Date(Date.now() + offset),
        env: {
          WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
          WEBHOOK_RETRY_SCHEDULE: '1ms,1ms,1ms,1ms',
          WEBHOOK_TIMEOUT_MS: '120000',
          WEBHOOK_DISABLE_AFTER: '150s',
        },
      });
      const minutePassed = () => {
        offset += 60_000;
      };
      const disabled = (endpoint: Endpoint) =>
        poll('the endpoint to be disabled', async () => {
          const res = (await server.request('GET', `/v1/webhook-endpoints/${endpoint.id}`)).json<
            Endpoint & { disabledReason?: string }
          >();
          return res.status === 'disabled' ? res : undefined;
        });
      const listed = async (endpoint: Endpoint) =>
        (await server.request('GET', `/v1/webhook-endpoints/${endpoint.id}/deliveries`)).json<
          DeliveryBody[]
        >();
      const register = async (path: string) =>
        (
          await server.request('POST', '/v1/webhook-endpoints', { body: { url: receiver.url(path) } })
        ).json<Endpoint>();
      return { server, minutePassed, disabled, listed, register };
    };

    test('when every delivery to an endpoint has failed for WEBHOOK_DISABLE_AFTER with no success between, then it is disabled ("failing") and its pending deliveries end', async () => {
      const { server, minutePassed, disabled, listed, register } = await startFailingSpellServer();
      try {
        receiver.answer((_request, n) => {
          // Failures at minutes 1, 2, 3, 4. The third is two minutes after the first failure, the fourth
          // three: it disables the endpoint, one attempt before the schedule (five attempts) runs out.
          minutePassed();
          return { status: 500, body: `attempt ${n}` };
        });
        const endpoint = await register('/failing');
        await server.request('POST', '/v1/pets', { body: { name: 'failing', categoryId: 1 } });
        assert.equal((await disabled(endpoint)).disabledReason, 'failing');
        const [delivery] = await listed(endpoint);
        assert.equal(delivery?.status, 'failed');
        assert.equal(delivery?.attempts, 4, 'disabled at the first failure 150 s or more after the first');
        assert.equal(receiver.received.filter((r) => r.path === '/failing').length, 4);
      } finally {
        await server.close();
      }
    });

    test('when a delivery succeeds between failures, then the failing spell starts again at the next failure: WEBHOOK_DISABLE_AFTER is counted from there', async () => {
      const { server, minutePassed, disabled, listed, register } = await startFailingSpellServer();
      try {
        let n = 0;
        receiver.answer((request) => {
          if (request.path !== '/recovering') return { status: 204 };
          minutePassed();
          n += 1;
          // The first event: failures at minutes 1 and 2, then a success at 3. The second: failures from
          // minute 4 on, three minutes after the first failure but the first of a new spell.
          return n === 3 ? { status: 204 } : { status: 500, body: `attempt ${n}` };
        });
        const endpoint = await register('/recovering');
        await server.request('POST', '/v1/pets', { body: { name: 'first', categoryId: 1 } });
        const [first] = await poll('the first delivery to succeed', async () => {
          const list = await listed(endpoint);
          return list[0]?.status === 'succeeded' ? list : undefined;
        });
        assert.equal(first?.attempts, 3);
        type Health = { lastSuccessAt: string | null; failingSince: string | null; status: string };
        const health = async () =>
          (await server.request('GET', `/v1/webhook-endpoints/${endpoint.id}`)).json<Health>();
        const afterSuccess = await health();
        assert.equal(afterSuccess.lastSuccessAt, first?.lastAttemptAt, 'the success is the last');
        assert.equal(afterSuccess.failingSince, null, 'and it ends the failing spell');
        await server.request('POST', '/v1/pets', { body: { name: 'second', categoryId: 1 } });
        assert.equal((await disabled(endpoint)).disabledReason, 'failing');
        const [second] = await listed(endpoint);
        assert.equal(second?.status, 'failed');
        const whileDisabled = await health();
        assert.equal(whileDisabled.lastSuccessAt, first?.lastAttemptAt, 'still the last success');
        assert.ok(
          whileDisabled.failingSince !== null && whileDisabled.failingSince > (first?.lastAttemptAt ?? ''),
          `failing since the first failure after it: ${whileDisabled.failingSince}`,
        );
        const enabled = await server.request('POST', `/v1/webhook-endpoints/${endpoint.id}/enable`);
        assert.equal(enabled.json<Health>().failingSince, null, 'enabled again: not failing');
        // Failures at minutes 4, 5, 6 and 7: disabled at the fourth, three minutes into the new spell
        // (counted from minute 1, the first failure ever, it would have been the first).
        assert.equal(second?.attempts, 4);
      } finally {
        await server.close();
      }
    });
  });
}

for (const backend of backends) {
  backend.describe(`webhook delivery over hours (${backend.name})`, () => {
    // The service's clock runs, and is moved forward by the tests; retries wait an hour.
    let offset = 0;
    let server: TestServer;
    let receiver: WebhookReceiver;
    before(async () => {
      receiver = await WebhookReceiver.start();
      server = await startTestServer({
        backend,
        now: () => new Date(Date.now() + offset),
        env: { WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8', WEBHOOK_RETRY_SCHEDULE: '1h' },
      });
    });
    after(async () => {
      await server.close();
      await receiver.close();
    });
    const register = async (path: string) => {
      const res = await server.request('POST', '/v1/webhook-endpoints', {
        body: { url: receiver.url(path) },
      });
      assert.equal(res.status, 201, res.text);
      return res.json<Endpoint>();
    };
    const createPet = async () =>
      assert.equal(
        (await server.request('POST', '/v1/pets', { body: { name: 'later', categoryId: 1 } })).status,
        201,
      );

    test('when 24 hours have passed since a rotation, then deliveries carry the new signature only', async () => {
      receiver.answer(() => ({ status: 204 }));
      // Rotated more than 24 hours ago (the clock set back for the rotation): the delivery, made now,
      // is signed with the new secret alone. (Now, because the reference verifier checks the timestamp.)
      offset = -(24 * 3_600_000 + 60_000);
      const endpoint = await register('/rotated-long-ago');
      const fresh = (
        await server.request('POST', `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`)
      ).json<Endpoint>();
      offset = 0;
      await createPet();
      const [request] = await receiver.waitFor(1, '/rotated-long-ago');
      assert.ok(request);
      assert.equal((request.headers['webhook-signature'] as string).split(' ').length, 1);
      verified(fresh.secret, request);
      assert.throws(() => verified(endpoint.secret, request));
    });

    test('when a pending delivery scheduled an hour ahead is retried, then it is attempted at once', async () => {
      // Its first attempt fails; any after it succeeds.
      let tries = 0;
      receiver.answer((request) =>
        request.path === '/pending-retried' && ++tries === 1 ? { status: 500 } : { status: 204 },
      );
      const endpoint = await register('/pending-retried');
      await createPet();
      const [pending] = await poll('the first attempt to fail', async () => {
        const list = (await server.request('GET', `/v1/webhook-endpoints/${endpoint.id}/deliveries`)).json<
          DeliveryBody[]
        >();
        return list[0]?.attempts === 1 ? list : undefined;
      });
      assert.equal(pending?.status, 'pending');
      const due = Date.parse(pending?.nextAttemptAt as string) - (Date.now() + offset);
      assert.ok(due > 30 * 60_000, `the next attempt is scheduled ${due} ms ahead`);
      const res = await server.request(
        'POST',
        `/v1/webhook-endpoints/${endpoint.id}/deliveries/${pending?.eventId}/retry`,
      );
      assert.equal(res.status, 202);
      await receiver.waitFor(2, '/pending-retried');
      const [delivery] = await poll('the retry to succeed', async () => {
        const list = (await server.request('GET', `/v1/webhook-endpoints/${endpoint.id}/deliveries`)).json<
          DeliveryBody[]
        >();
        return list[0]?.status === 'succeeded' ? list : undefined;
      });
      assert.equal(delivery?.attempts, 2);
    });
  });
}
