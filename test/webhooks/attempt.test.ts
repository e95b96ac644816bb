import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { NetworkPolicy, parseNetworks } from '../../src/domain/network-policy.js';
import type { ClaimedDelivery } from '../../src/domain/webhooks.js';
import { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.js';
import {
  type AttemptParts,
  attemptDelivery,
  type DelivererLog,
  type DelivererMetrics,
} from '../../src/webhooks/attempt.js';
import { WebhookSender } from '../../src/webhooks/sender.js';
import { webhookHeaders } from '../../src/webhooks/signature.js';

/**
 * One attempt of a leased delivery, in process: the real SQLite storage in memory, the real sender
 * against a receiver in this process (127.0.0.0/8 allowed), and a log and metrics that record what
 * they are told.
 */

const OCCURRED_AT = new Date('2026-12-06T10:00:00.000Z');
/** The attempt's clock: it starts at STARTED_AT and is answered 1.5 s later. */
const STARTED_AT = new Date('2026-12-06T10:00:07.250Z');
const ANSWERED_AT = new Date(STARTED_AT.getTime() + 1_500);

interface Received {
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

class Recorder implements DelivererLog, DelivererMetrics {
  readonly calls: unknown[][] = [];
  info(object: object, message: string): void {
    this.calls.push(['info', object, message]);
  }
  warn(object: object, message: string): void {
    this.calls.push(['warn', object, message]);
  }
  attempted(outcome: string, seconds: number): void {
    this.calls.push(['attempted', outcome, seconds]);
  }
  disabled(reason: string): void {
    this.calls.push(['disabled', reason]);
  }
  delivered(lagSeconds: number): void {
    this.calls.push(['delivered', lagSeconds]);
  }
}

describe('attemptDelivery', () => {
  let receiver: Server;
  let baseUrl: string;
  const received: Received[] = [];
  let answer = { status: 200, body: 'ok' };
  const sender = new WebhookSender(new NetworkPolicy(parseNetworks('127.0.0.0/8')), {
    timeoutMs: 5_000,
    connectionsPerEndpoint: 1,
  });
  let storage: SqliteStorage;
  let endpointId: bigint;

  before(async () => {
    receiver = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => {
        body += chunk;
      });
      req.on('end', () => {
        received.push({ url: req.url ?? '', headers: req.headers, body });
        res.writeHead(answer.status, { 'content-type': 'text/plain' }).end(answer.body);
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  });
  after(async () => {
    await sender.destroy();
    await new Promise((resolve) => receiver.close(resolve));
  });

  beforeEach(async () => {
    received.length = 0;
    answer = { status: 200, body: 'ok' };
    storage = new SqliteStorage(':memory:', { timeoutMs: 1_000 });
    const endpoint = await storage.webhookEndpoints.createEndpoint(
      { url: `${baseUrl}/hook`, types: ['*'], description: '', secret: 'whsec_AAAA', createdAt: OCCURRED_AT },
      10,
    );
    assert.ok(endpoint);
    endpointId = endpoint.id;
    await storage.pets.create({
      pet: { name: 'Rex', categoryId: 1n, status: 'available' },
      at: OCCURRED_AT,
    });
    assert.equal(await storage.deliveries.fanOut(10), 1);
  });
  afterEach(async () => {
    await storage.close();
  });

  async function claim(owner = 'this', leaseMs = 60_000): Promise<ClaimedDelivery> {
    const now = new Date(Date.now() + 1_000);
    const { deliveries } = await storage.deliveries.claimDue(now, new Date(now.getTime() + leaseMs), {
      limit: 10,
      perEndpoint: 4,
      owner,
      depths: new Map(),
    });
    assert.equal(deliveries.length, 1);
    return deliveries[0] as ClaimedDelivery;
  }

  function parts(recorder: Recorder, overrides: Partial<AttemptParts> = {}): AttemptParts {
    const clock = [STARTED_AT, ANSWERED_AT];
    return {
      store: storage.deliveries,
      sender,
      schedule: [60_000],
      disableAfterMs: 3_600_000,
      now: () => clock.shift() ?? assert.fail('the clock is read twice'),
      log: recorder,
      metrics: recorder,
      random: () => 0.5,
      ...overrides,
    };
  }

  async function attempts() {
    return (await storage.deliveries.listAttempts(endpointId, 1n, 0, 10)) ?? [];
  }

  test('when the receiver answers 2xx, then the request is signed at the start time, the answer timed, and success and lag told, nothing logged; no retry', async () => {
    const recorder = new Recorder();
    const delivery = await claim();
    const times: number[] = [];
    const before = performance.now();
    const retry = await attemptDelivery(parts(recorder), delivery, (ms) => times.push(ms));
    const took = performance.now() - before;
    assert.equal(retry, false);

    assert.equal(received.length, 1);
    const [request] = received;
    assert.equal(request?.url, '/hook');
    assert.equal(request?.body, delivery.body);
    const signed = webhookHeaders(
      delivery.secrets,
      '1',
      Math.floor(STARTED_AT.getTime() / 1000),
      delivery.body,
    );
    assert.equal(signed['webhook-timestamp'], '1796551207');
    for (const [name, value] of Object.entries(signed)) assert.equal(request?.headers[name], value, name);

    assert.equal(times.length, 1);
    const [ms] = times as [number];
    assert.ok(ms > 0 && ms <= took, `answered in ${ms} ms, the whole attempt took ${took} ms`);
    assert.deepEqual(recorder.calls, [
      ['attempted', 'succeeded', ms / 1000],
      ['delivered', 8.75],
    ]);
    const [listed] = await attempts();
    assert.equal(listed?.startedAt.toISOString(), STARTED_AT.toISOString());
    assert.equal(listed?.responseStatus, 200);
    assert.equal(listed?.durationMs, Math.round(ms));
    assert.equal(listed?.trigger, 'schedule');
  });

  test('when the receiver answers 500 with attempts left, then a retry is scheduled and told as retrying, nothing logged', async () => {
    answer = { status: 500, body: 'down' };
    const recorder = new Recorder();
    const retry = await attemptDelivery(parts(recorder), await claim(), () => {});
    assert.equal(retry, true);
    assert.equal(recorder.calls.length, 1);
    assert.equal(recorder.calls[0]?.[0], 'attempted');
    assert.equal(recorder.calls[0]?.[1], 'retrying');
    const [listed] = await attempts();
    assert.equal(listed?.responseStatus, 500);
    assert.equal(listed?.responseBody, 'down');
  });

  test('when the receiver answers 500 and no attempt is left, then it is told as failed and logged with its attempts and last error; no retry', async () => {
    answer = { status: 500, body: 'down' };
    const recorder = new Recorder();
    const delivery = await claim();
    const retry = await attemptDelivery(parts(recorder, { schedule: [] }), delivery, () => {});
    assert.equal(retry, false);
    assert.equal(recorder.calls.length, 2);
    assert.equal(recorder.calls[0]?.[1], 'failed');
    assert.deepEqual(recorder.calls[1], [
      'warn',
      { endpointId: String(endpointId), eventId: '1', attempts: 1, lastError: 'HTTP 500: down' },
      'webhook delivery failed: no attempt left',
    ]);
  });

  test('when the receiver answers 410, then the endpoint is disabled as gone: told to the metrics and logged; no retry', async () => {
    answer = { status: 410, body: '' };
    const recorder = new Recorder();
    const retry = await attemptDelivery(parts(recorder), await claim(), () => {});
    assert.equal(retry, false);
    assert.deepEqual(
      recorder.calls.map(([kind, detail]) => (kind === 'attempted' ? `${kind} ${detail}` : kind)),
      ['attempted failed', 'warn', 'disabled', 'warn'],
      'a 410 fails the delivery too',
    );
    const told = recorder.calls.filter(([kind]) => kind !== 'attempted');
    assert.deepEqual(told.at(-2), ['disabled', 'gone']);
    assert.deepEqual(told.at(-1), [
      'warn',
      { endpointId: String(endpointId), reason: 'gone', lastError: 'HTTP 410' },
      'webhook endpoint disabled',
    ]);
    assert.equal((await storage.webhookEndpoints.findEndpoint(endpointId))?.status, 'disabled');
  });

  test('when an endpoint has failed for longer than disableAfterMs, then it is disabled as failing; for less, it is not', async () => {
    answer = { status: 500, body: '' };
    const patient = new Recorder();
    assert.equal(await attemptDelivery(parts(patient, { disableAfterMs: 1 }), await claim(), () => {}), true);
    assert.equal(
      patient.calls.some(([kind]) => kind === 'disabled'),
      false,
      'failing since this very attempt, 1 ms ago is not yet',
    );
    // The next attempt, answered again 1.5 s later on the attempt's clock: failing since 1.5 s.
    await storage.deliveries.retryDelivery(endpointId, 1n, new Date());
    const impatient = new Recorder();
    const clock = [ANSWERED_AT, new Date(ANSWERED_AT.getTime() + 1_500)];
    const retry = await attemptDelivery(
      parts(impatient, {
        schedule: [60_000, 60_000],
        disableAfterMs: 1_000,
        now: () => clock.shift() as Date,
      }),
      await claim(),
      () => {},
    );
    assert.equal(retry, false);
    assert.deepEqual(impatient.calls[0]?.[1], 'retrying');
    assert.deepEqual(impatient.calls[1], ['disabled', 'failing']);
    assert.deepEqual(impatient.calls[2], [
      'warn',
      { endpointId: String(endpointId), reason: 'failing', lastError: 'HTTP 500' },
      'webhook endpoint disabled',
    ]);
  });

  test('when the outcome cannot be written, then a warning is logged with the error, nothing told to the metrics, and no retry', async () => {
    const recorder = new Recorder();
    const delivery = await claim();
    await storage.close();
    const retry = await attemptDelivery(parts(recorder), delivery, () => {});
    assert.equal(retry, false);
    assert.equal(recorder.calls.length, 1);
    const [kind, object, message] = recorder.calls[0] as [string, Record<string, unknown>, string];
    assert.equal(kind, 'warn');
    assert.equal(message, 'recording a webhook attempt failed');
    assert.ok(object.err instanceof Error);
    assert.equal(object.endpointId, String(endpointId));
    assert.equal(object.eventId, '1');
    storage = new SqliteStorage(':memory:', { timeoutMs: 1_000 });
  });

  test('when the lease has passed to another process, then the attempt is not recorded: nothing told, nothing logged, no retry', async () => {
    answer = { status: 500, body: '' };
    const recorder = new Recorder();
    const stale = await claim('this');
    await storage.deliveries.releaseLeases([stale]);
    await claim('another', 120_000);
    const retry = await attemptDelivery(parts(recorder), stale, () => {});
    assert.equal(retry, false);
    assert.deepEqual(recorder.calls, []);
  });

  test('when tracing is on, then the tracer runs the attempt and the request carries its headers beside the signature', async () => {
    const recorder = new Recorder();
    const delivery = await claim();
    const traced: ClaimedDelivery[] = [];
    const retry = await attemptDelivery(
      parts(recorder, {
        tracer: {
          attempt: (attempted, send) => {
            traced.push(attempted);
            return send({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' });
          },
        },
      }),
      delivery,
      () => {},
    );
    assert.equal(retry, false);
    assert.deepEqual(traced, [delivery]);
    assert.equal(received[0]?.headers.traceparent, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
    assert.equal(received[0]?.headers['webhook-id'], '1');
    assert.ok(received[0]?.headers['webhook-signature']);
  });

  test('when no metrics are given, then a success and a disabling are made all the same', async () => {
    const recorder = new Recorder();
    assert.equal(
      await attemptDelivery(parts(recorder, { metrics: undefined }), await claim(), () => {}),
      false,
    );
    assert.equal((await attempts())[0]?.responseStatus, 200);
    await storage.pets.create({ pet: { name: 'Ace', categoryId: 1n, status: 'available' }, at: OCCURRED_AT });
    assert.equal(await storage.deliveries.fanOut(10), 1);
    answer = { status: 410, body: '' };
    assert.equal(
      await attemptDelivery(parts(recorder, { metrics: undefined }), await claim(), () => {}),
      false,
    );
    assert.deepEqual(
      recorder.calls.map(([, , message]) => message),
      ['webhook delivery failed: no attempt left', 'webhook endpoint disabled'],
    );
  });
});
