import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { StorageUnavailableError } from '../../src/domain/errors.js';
import { poll } from '../support/cli.js';
import { harnesses } from '../support/deliverer-harness.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

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

  test('when the database tells of no change, then the deliverer still looks for events after its idle bound', async (t) => {
    const h = await harness(t, { path: '/idle', watched: false });
    h.start();
    await poll('the first round', () => (h.claims().length > 0 ? true : undefined));
    await h.createPets(1);
    assert.deepEqual(await h.settled(1), { '1': 'succeeded/1' });
    assert.deepEqual(
      h.trace().filter((c) => c.startsWith('fanOut') || c.startsWith('recoverNext')),
      ['fanOut 0', 'recoverNext 0', 'fanOut 1', 'recoverNext 0'],
      'only the first round and the one after the idle bound look',
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
});
