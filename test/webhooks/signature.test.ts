import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { newWebhookSecret } from '../../src/domain/webhooks.js';
import { signatureHeader } from '../../src/webhooks/signature.js';

/** Signatures checked with the reference library (standardwebhooks), not with the service's own code. */
const BODY = '{"id":1,"type":"pet.created","occurredAt":"2026-11-28T10:00:00.000Z","data":{"id":1}}';

test('when a delivery is signed, then the reference library verifies it with the secret, and refuses another secret or body', () => {
  const secret = newWebhookSecret();
  const timestamp = Math.floor(Date.now() / 1000);
  const headers = { 'webhook-id': 'evt_1', 'webhook-timestamp': String(timestamp) };
  const signature = signatureHeader([secret], 'evt_1', timestamp, BODY);
  assert.match(signature, /^v1,[A-Za-z0-9+/]{43}=$/);
  assert.deepEqual(
    new Webhook(secret).verify(BODY, { ...headers, 'webhook-signature': signature }),
    JSON.parse(BODY),
  );
  assert.throws(() =>
    new Webhook(newWebhookSecret()).verify(BODY, { ...headers, 'webhook-signature': signature }),
  );
  assert.throws(() => new Webhook(secret).verify(`${BODY} `, { ...headers, 'webhook-signature': signature }));
});

test('when two secrets sign (a rotation), then one signature each, space-separated, each verifying with its own secret', () => {
  const [current, previous] = [newWebhookSecret(), newWebhookSecret()];
  const timestamp = Math.floor(Date.now() / 1000);
  const signature = signatureHeader([current, previous], 'evt_2', timestamp, BODY);
  const parts = signature.split(' ');
  assert.equal(parts.length, 2);
  const headers = { 'webhook-id': 'evt_2', 'webhook-timestamp': String(timestamp) };
  for (const [secret, part] of [
    [current, parts[0]],
    [previous, parts[1]],
  ] as const)
    assert.deepEqual(
      new Webhook(secret).verify(BODY, { ...headers, 'webhook-signature': part as string }),
      JSON.parse(BODY),
    );
  // The key is the secret's decoded bytes: the same secret without its prefix signs the same.
  assert.equal(signatureHeader([current.slice('whsec_'.length)], 'evt_2', timestamp, BODY), parts[0]);
});
