import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { StorageUnavailableError } from '../../src/domain/errors.js';
import { poll } from '../support/cli.js';
import { harnesses } from '../support/deliverer-harness.js';
import { type Answer, WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * The deliverer's own pauses, as deliverer.test.ts drives it: its idle bound (5 s) and its pause after
 * a failed round (1 s). Apart because they wait those out: the rest of its tests take none of it.
 */
describe('Deliverer, its pauses', () => {
  let receiver: WebhookReceiver;
  before(async () => {
    receiver = await WebhookReceiver.start();
  });
  after(() => receiver.close());
  const { harness } = harnesses(() => receiver);

  test('when the endpoint is at its bound and the database tells of no change, then the deliverer sleeps until its idle bound, then looks for events again', async (t) => {
    let answer: ((value: Answer) => void) | undefined;
    const held = new Promise<Answer>((resolve) => {
      answer = resolve;
    });
    const h = await harness(
      t,
      { path: '/idle', timeoutMs: 30_000, concurrencyPerEndpoint: 1, watched: false },
      (n) => (n === 1 ? held : { status: 204 }),
    );
    await h.createPets(2);
    h.start();
    await receiver.waitFor(1, '/idle');
    // The second is due, but the endpoint is at its bound, and the third is not told of: nothing to do
    // until the idle bound, when it looks for events again.
    await h.createPets(1);
    await poll('the look after the idle bound', () => (h.calls.length > 3 ? true : undefined));
    answer?.({ status: 204 });
    assert.deepEqual(await h.settled(3), { '1': 'succeeded/1', '2': 'succeeded/1', '3': 'succeeded/1' });
    assert.deepEqual(
      h.trace().slice(0, 5),
      ['fanOut 2', 'recoverNext 0', 'claimDue 1', 'fanOut 1', 'recoverNext 0'],
      'no round between the first and the one after the idle bound',
    );
  });

  test('when the database is unavailable, then the round is given up quietly; when it fails otherwise, then that is logged; the next round delivers', async (t) => {
    const h = await harness(t, { path: '/fail', watched: false });
    const boom = new Error('boom');
    h.failing.fanOut = [new StorageUnavailableError('the database is unavailable')];
    h.failing.claimDue = [boom];
    await h.createPets(1);
    h.start();
    await h.settled(1);
    assert.deepEqual(h.logged, [['warn', { err: boom }, 'claiming webhook deliveries failed']]);
    assert.deepEqual(h.trace().slice(0, 3), ['fanOut 1', 'recoverNext 0', 'claimDue 1']);
  });

  test('when a rate-limited endpoint has used its tokens and the database tells of no change, then the deliverer sleeps until its next token, not its idle bound, then claims the next delivery', async (t) => {
    const h = await harness(t, { path: '/throttled', rateLimit: 1, watched: false });
    await h.createPets(2);
    h.start();
    assert.deepEqual(await h.settled(2), { '1': 'succeeded/1', '2': 'succeeded/1' });
    // Its first round takes the one token; then only the attempt's answer and outcome wake it (the
    // database tells nothing), each finding the endpoint throttled, until the sleep to the next token.
    const trace = h.trace();
    const next = trace.indexOf('claimDue 1', 3);
    assert.deepEqual(trace.slice(0, 3), ['fanOut 2', 'recoverNext 0', 'claimDue 1']);
    const between = trace.slice(3, next);
    // None if the first attempt took longer than the second's token (a very slow machine): then it was
    // never throttled, and the claim at the answer takes the second.
    assert.ok(
      between.length <= 3 && between.every((call) => call === 'claimDue 0'),
      `between the two claims only a claim at each wake, no look at the idle bound: ${between}`,
    );
    const [first, ...rest] = h.claims();
    const nextToken = (first?.now.getTime() ?? 0) + 1_000;
    for (const claim of rest.slice(0, between.length))
      assert.equal(claim.result.throttledUntil?.getTime(), nextToken, 'told when the next token comes');
    const second = rest[between.length];
    assert.deepEqual(
      second?.result.deliveries.map((d) => d.eventId),
      [2n],
    );
    assert.ok((second?.now.getTime() ?? 0) >= nextToken, 'one token a second: not leased before it');
  });
});
