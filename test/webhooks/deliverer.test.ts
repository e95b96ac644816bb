import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { StorageUnavailableError } from '../../src/domain/errors.js';
import { NetworkPolicy, parseNetworks } from '../../src/domain/network-policy.js';
import type { DelivererMetrics, DeliveryTracer } from '../../src/webhooks/attempt.js';
import { Deliverer } from '../../src/webhooks/deliverer.js';
import { newDeliverer } from '../../src/webhooks/new-deliverer.js';
import { WebhookSender } from '../../src/webhooks/sender.js';
import { poll } from '../support/cli.js';
import { type Call, harnesses } from '../support/deliverer-harness.js';
import { type Answer, WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * The deliverer's rounds, in process (test/support/deliverer-harness.ts): the real SQLite storage in
 * memory seen through a wrapper that records what the deliverer asks of it, the real sender, and a
 * receiver in this process. Rounds are told apart by the order of those calls, never by their timing.
 * Those that wait for the deliverer's own pauses are in deliverer-pauses.test.ts.
 */
describe('Deliverer', () => {
  let receiver: WebhookReceiver;
  before(async () => {
    receiver = await WebhookReceiver.start();
  });
  after(() => receiver.close());
  const { harness, requestsTo, eventIds } = harnesses(() => receiver);

  test('when events wait at the start, then the first round fans them out in batches of 100, looks at the recoveries, and leases them all for the timeout and its margin, as one owner', async (t) => {
    const h = await harness(t, {
      path: '/first',
      timeoutMs: 2_000,
      concurrencyPerEndpoint: 2,
      watched: false,
    });
    await h.createPets(3);
    h.start();
    assert.deepEqual(await h.settled(3), { '1': 'succeeded/1', '2': 'succeeded/1', '3': 'succeeded/1' });
    assert.deepEqual(eventIds('/first').sort(), [1, 2, 3]);

    assert.deepEqual(h.trace().slice(0, 3), ['fanOut 3', 'recoverNext 0', 'claimDue 2']);
    const [fanOut, recover] = h.calls as [Call & { name: 'fanOut' }, Call & { name: 'recoverNext' }];
    assert.equal(fanOut.batch, 100);
    assert.equal(recover.batch, 100);
    const claims = h.claims();
    const [first] = claims as [Extract<Call, { name: 'claimDue' }>];
    // A 2 s timeout: its margin is as long again (under 5 s), so the lease is 4 s.
    assert.equal(first.leaseUntil.getTime() - first.now.getTime(), 4_000);
    assert.deepEqual(
      { limit: first.limits.limit, perEndpoint: first.limits.perEndpoint, depths: [...first.limits.depths] },
      { limit: 2_048, perEndpoint: 2, depths: [] },
    );
    assert.match(first.limits.owner, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.deepEqual(new Set(claims.map((c) => c.limits.owner)).size, 1, 'one owner in every claim');
    // The first round claims two (the endpoint's bound with its pace unknown); the third is claimed once
    // an attempt ended, with the endpoint's pace now known and its depth leased ahead.
    assert.deepEqual(
      claims.map((c) => c.result.deliveries.length).filter((n) => n > 0),
      [2, 1],
    );
    const paced = claims.find((c) => c.limits.depths.size > 0);
    assert.ok(paced, 'a claim after an answer names the endpoint with its depth');
    assert.ok((paced.limits.depths.get(h.endpointId) ?? 0) >= 2);
    assert.deepEqual(h.logged, []);
  });

  test('when the timeout is long, then the lease margin is 5 s at most', async (t) => {
    const h = await harness(t, { path: '/long', timeoutMs: 30_000, watched: false });
    await h.createPets(1);
    h.start();
    await h.settled(1);
    const [first] = h.claims();
    assert.equal((first?.leaseUntil.getTime() ?? 0) - (first?.now.getTime() ?? 0), 35_000);
  });

  test('when more than a batch of events wait, then the next round fans out again until a batch is short, and no further', async (t) => {
    const h = await harness(t, { path: '/many', watched: false });
    await h.createPets(101);
    h.start();
    await h.settled(101);
    const fanOuts = h.trace().filter((c) => c.startsWith('fanOut'));
    assert.deepEqual(fanOuts, ['fanOut 100', 'fanOut 1']);
    // The second round fans out at once: it is the round after the first claim.
    assert.deepEqual(h.trace().slice(0, 4), ['fanOut 100', 'recoverNext 0', 'claimDue 4', 'fanOut 1']);
  });

  test('when events commit while the deliverer waits, then the database tells it and each is delivered in turn', async (t) => {
    const h = await harness(t, { path: '/told' });
    h.start();
    // One after another: each is delivered only if the commit woke the deliverer (it would otherwise
    // look again after its idle bound, 5 s each).
    for (let i = 1; i <= 4; i++) {
      await h.createPets(1);
      await receiver.waitFor(i, '/told');
    }
    assert.deepEqual(eventIds('/told'), [1, 2, 3, 4]);
    assert.deepEqual(await h.settled(4), {
      '1': 'succeeded/1',
      '2': 'succeeded/1',
      '3': 'succeeded/1',
      '4': 'succeeded/1',
    });
    assert.equal(h.trace().filter((c) => c === 'fanOut 1').length, 4);
  });

  test('when an attempt is answered 500, then its retry is attempted when due, as often as the schedule says', async (t) => {
    const h = await harness(t, { path: '/retry', schedule: [20, 20, 20, 20] }, (n) =>
      n <= 4 ? { status: 500 } : { status: 204 },
    );
    h.start();
    await h.createPets(1);
    assert.deepEqual(await h.settled(1), { '1': 'succeeded/5' });
    assert.deepEqual(eventIds('/retry'), [1, 1, 1, 1, 1]);
    assert.deepEqual(h.logged, []);
  });

  test('when the endpoint is slower than its bound allows, then no more than concurrencyPerEndpoint attempts are under way at once', async (t) => {
    let release: (() => void) | undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const h = await harness(t, { path: '/bound', concurrencyPerEndpoint: 2, watched: false }, async (n) => {
      if (n === 2) release?.();
      if (n === 1) await gate;
      return { status: 204 };
    });
    await h.createPets(6);
    h.start();
    await h.settled(6);
    assert.equal(receiver.maxConcurrent.get('/bound'), 2);
    assert.deepEqual(eventIds('/bound').sort(), [1, 2, 3, 4, 5, 6]);
  });

  test('when everything is recorded and the deliverer is woken, then it claims with the room of all its leases again', async (t) => {
    const h = await harness(t, { path: '/room', watched: false });
    await h.createPets(5);
    const deliverer = h.start();
    await h.settled(5);
    const claimed = h.claims().length;
    deliverer.wake();
    const next = await poll('a claim after the wake', () => h.claims()[claimed]);
    assert.equal(next.limits.limit, 2_048);
    assert.deepEqual(eventIds('/room').sort(), [1, 2, 3, 4, 5]);
  });

  test('when failed deliveries are recovered, then each round moves the next batch until none is left, and they are delivered again', async (t) => {
    const h = await harness(t, { path: '/recover', schedule: [], watched: false }, (n) =>
      n <= 3 ? { status: 500 } : { status: 204 },
    );
    await h.createPets(3);
    h.start();
    assert.deepEqual(await h.settled(3, 'failed'), { '1': 'failed/1', '2': 'failed/1', '3': 'failed/1' });
    await h.stopAll();
    const started = await h.storage.deliveries.startRecovery(
      h.endpointId,
      { since: new Date(0), until: new Date(Date.now() + 60_000) },
      new Date(),
    );
    assert.equal(started.outcome, 'started');
    h.calls.length = 0;
    h.start();
    assert.deepEqual(await h.settled(3), { '1': 'succeeded/2', '2': 'succeeded/2', '3': 'succeeded/2' });
    const recoveries = h.calls.filter((c) => c.name === 'recoverNext');
    assert.deepEqual(
      recoveries.map((c) => [c.batch, c.result]),
      [
        [100, 3],
        [100, 0],
      ],
    );
    // The second look is the next round's: it is not left for the idle bound.
    assert.deepEqual(h.trace().slice(0, 4), ['fanOut 0', 'recoverNext 3', 'claimDue 3', 'recoverNext 0']);
  });

  test('when a queued delivery’s lease no longer covers an attempt, then it is given back unattempted, and attempted under a new lease', async (t) => {
    const h = await harness(t, { path: '/expired', timeoutMs: 2_000, watched: false });
    await h.createPets(1);
    // The clock moves on by the lease's margin between the claim and the start: it ends as the attempt would.
    h.afterClaim = () => {
      h.afterClaim = undefined;
      h.offsetMs += 2_000;
    };
    const deliverer = h.start();
    const released = await poll('the lease given back', () =>
      h.calls.find((c) => c.name === 'releaseLeases'),
    );
    assert.deepEqual(
      released.deliveries.map((d) => d.eventId),
      [1n],
    );
    assert.equal(requestsTo('/expired').length, 0);
    deliverer.wake();
    assert.deepEqual(await h.settled(1), { '1': 'succeeded/1' });
    assert.equal(requestsTo('/expired').length, 1);
    assert.deepEqual(h.logged, []);
  });

  test('when giving back an expired lease fails, then that is logged, unless the database is unavailable', async (t) => {
    const h = await harness(t, { path: '/unreleased', timeoutMs: 2_000 });
    await h.createPets(1);
    // Every claim moves the clock on by the lease's margin: each delivery claimed has expired at its start.
    h.afterClaim = () => {
      h.offsetMs += 2_000;
    };
    const boom = new Error('boom');
    h.failing.releaseLeases = [new StorageUnavailableError('the database is unavailable'), boom];
    h.start();
    await poll('a lease given back', () => h.calls.find((c) => c.name === 'releaseLeases'));
    // Its lease still held (the release failed): the next claim, told of the next event, takes only its.
    await h.createPets(1);
    await poll('the failure logged', () => (h.logged.length > 0 ? true : undefined));
    assert.deepEqual(h.logged, [['warn', { err: boom }, 'giving back webhook delivery leases failed']]);
    assert.equal(requestsTo('/unreleased').length, 0);
  });

  test('when stopped while an attempt is under way, then the attempt answered within the grace is recorded and no lease given back', async (t) => {
    let answer: ((value: Answer) => void) | undefined;
    const held = new Promise<Answer>((resolve) => {
      answer = resolve;
    });
    const h = await harness(t, { path: '/graced', watched: false }, () => held);
    await h.createPets(1);
    const deliverer = h.start();
    await receiver.waitFor(1, '/graced');
    const stopped = deliverer.stop(60_000);
    answer?.({ status: 204 });
    await stopped;
    assert.deepEqual(await h.deliveries(), { '1': 'succeeded/1' });
    assert.equal(h.calls.filter((c) => c.name === 'releaseLeases').length, 0);
  });

  test('when stopped while an attempt hangs past the grace, then its lease and those queued are given back and nothing is recorded for them', async (t) => {
    const h = await harness(t, { path: '/hung', concurrencyPerEndpoint: 1 }, (n) =>
      n === 1 ? { status: 204 } : { hang: true },
    );
    await h.createPets(1);
    const deliverer = h.start();
    await h.settled(1);
    // The endpoint's pace is known now: the next claim leases it deeper than one.
    await h.createPets(3);
    await receiver.waitFor(2, '/hung');
    const leased = () => h.claims().reduce((sum, c) => sum + c.result.deliveries.length, 0);
    await poll('all four leased', () => (leased() === 4 ? true : undefined));
    await deliverer.stop(10);
    const released = h.calls.filter((c) => c.name === 'releaseLeases');
    assert.equal(released.length, 1);
    assert.deepEqual(released[0]?.deliveries.map((d) => d.eventId).sort(), [2n, 3n, 4n]);
    assert.deepEqual(await h.deliveries(), {
      '1': 'succeeded/1',
      '2': 'pending/0',
      '3': 'pending/0',
      '4': 'pending/0',
    });
    assert.equal(requestsTo('/hung').length, 2, 'the queued ones were never sent');
    // Given back: due at once, so a claim now leases them all.
    const now = new Date();
    const again = await h.storage.deliveries.claimDue(now, new Date(now.getTime() + 60_000), {
      limit: 10,
      perEndpoint: 10,
      owner: 'another',
      depths: new Map(),
    });
    assert.equal(again.deliveries.length, 3);
  });

  test('when a deliverer is made from the configuration, then it reaches the allowed networks, gives up at its timeout, retries on its schedule, bounds the endpoint and tells its metrics and tracer', async (t) => {
    const h = await harness(t, { path: '/configured', watched: false }, (n) =>
      n === 1 ? { hang: true } : { status: 204 },
    );
    const config = loadConfig({
      DATABASE_URL: 'sqlite::memory:',
      WEBHOOK_TIMEOUT_MS: '200',
      WEBHOOK_RETRY_SCHEDULE: '20ms',
      WEBHOOK_CONCURRENCY_PER_ENDPOINT: '3',
      WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
    });
    const told: string[] = [];
    const metrics: DelivererMetrics = {
      attempted: (outcome) => told.push(`attempted ${outcome}`),
      disabled: (reason) => told.push(`disabled ${reason}`),
      delivered: () => told.push('delivered'),
    };
    const tracer: DeliveryTracer = {
      attempt: (delivery, send) => {
        told.push(`span ${delivery.eventId}`);
        return send({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' });
      },
    };
    await h.createPets(1);
    h.run(newDeliverer(config, h.queue, { now: () => new Date(), log: h.log, metrics, tracer }));
    assert.deepEqual(await h.settled(1), { '1': 'succeeded/2' });
    assert.deepEqual(told, ['span 1', 'attempted retrying', 'span 1', 'attempted succeeded', 'delivered']);
    const [first] = (await h.storage.deliveries.listAttempts(h.endpointId, 1n, 0, 10)) ?? [];
    assert.equal(first?.error, 'no answer within 200 ms');
    const [answered] = requestsTo('/configured').slice(-1);
    assert.equal(answered?.headers.traceparent, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
    const [claim] = h.claims();
    assert.equal((claim?.leaseUntil.getTime() ?? 0) - (claim?.now.getTime() ?? 0), 400);
    assert.equal(claim?.limits.perEndpoint, 3);
    assert.deepEqual(h.logged, []);
  });

  test('when stopped before it was started, then there is nothing to give back', async (t) => {
    const h = await harness(t, { path: '/unstarted' });
    const deliverer = new Deliverer({
      store: h.queue,
      sender: new WebhookSender(new NetworkPolicy(parseNetworks('127.0.0.0/8')), {
        timeoutMs: 1_000,
        connectionsPerEndpoint: 1,
      }),
      schedule: [],
      timeoutMs: 1_000,
      disableAfterMs: 3_600_000,
      concurrencyPerEndpoint: 1,
      now: () => new Date(),
      log: h.log,
    });
    await deliverer.stop(0);
    assert.deepEqual(h.calls, [], 'no round, and no lease given back');
  });
});
