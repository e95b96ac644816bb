import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type AttemptAnswer, attemptOutcome } from '../../src/domain/attempt-outcome.js';
import { NetworkPolicy } from '../../src/domain/network-policy.js';
import type { AttemptTrigger } from '../../src/domain/webhooks.js';
import {
  type AttemptOutcome,
  checkEndpointUrl,
  disabledBy,
  endpointTypes,
  InvalidEndpointError,
  newWebhookSecret,
  signingSecrets,
  statusAfter,
  subscribesTo,
} from '../../src/domain/webhooks.js';

const NOW = new Date('2026-11-28T12:00:00.000Z');
/** WEBHOOK_DISABLE_AFTER's default, 5 days. */
const DISABLE_AFTER_MS = 5 * 24 * 60 * 60 * 1000;
const disableIfFailingSince = new Date(NOW.getTime() - DISABLE_AFTER_MS);

const failed = (overrides: Partial<AttemptOutcome> = {}): AttemptOutcome => ({
  at: NOW,
  startedAt: NOW,
  durationMs: 12,
  responseBody: '',
  noAnswer: undefined,
  succeeded: false,
  responseStatus: 500,
  error: 'HTTP 500',
  nextAttemptAt: new Date(NOW.getTime() + 60_000),
  gone: false,
  ...overrides,
});

test('when failures began exactly WEBHOOK_DISABLE_AFTER ago, then the endpoint is disabled (failing); a millisecond later, not yet', () => {
  assert.equal(disabledBy(failed(), disableIfFailingSince, disableIfFailingSince), 'failing');
  assert.equal(
    disabledBy(failed(), new Date(disableIfFailingSince.getTime() - 1), disableIfFailingSince),
    'failing',
  );
  assert.equal(
    disabledBy(failed(), new Date(disableIfFailingSince.getTime() + 1), disableIfFailingSince),
    undefined,
  );
  assert.equal(
    disabledBy(failed(), undefined, disableIfFailingSince),
    undefined,
    'no failure before this one',
  );
});

test('when the receiver answers 410, then the endpoint is disabled at once (gone), however recent its failures', () => {
  assert.equal(
    disabledBy(failed({ gone: true, responseStatus: 410 }), undefined, disableIfFailingSince),
    'gone',
  );
  assert.equal(disabledBy(failed({ gone: true }), disableIfFailingSince, disableIfFailingSince), 'gone');
});

test('when an attempt ends, then the delivery is succeeded, pending while another attempt is due, or failed', () => {
  assert.equal(statusAfter(failed({ succeeded: true, nextAttemptAt: undefined })), 'succeeded');
  assert.equal(statusAfter(failed()), 'pending');
  assert.equal(statusAfter(failed({ nextAttemptAt: undefined })), 'failed');
  assert.equal(statusAfter(failed({ gone: true })), 'failed', 'a 410 is final');
});

test('when a previous secret is still valid, then deliveries are signed with both; from its end on, with the current one', () => {
  const until = new Date(NOW.getTime() + 1);
  assert.deepEqual(signingSecrets('new', 'old', until, NOW), ['new', 'old']);
  assert.deepEqual(signingSecrets('new', 'old', NOW, NOW), ['new']);
  assert.deepEqual(signingSecrets('new', undefined, until, NOW), ['new']);
  assert.deepEqual(signingSecrets('new', 'old', undefined, NOW), ['new']);
  assert.match(newWebhookSecret(), /^whsec_[A-Za-z0-9+/]{43}=$/);
});

test('when types are given, then every type, a list without repeats, or 400 naming types', () => {
  assert.deepEqual(endpointTypes(undefined), ['*']);
  assert.deepEqual(endpointTypes(['*']), ['*']);
  assert.deepEqual(endpointTypes(['order.placed', 'pet.created', 'order.placed']), [
    'order.placed',
    'pet.created',
  ]);
  for (const bad of [[], ['pet.deleted'], ['*', 'pet.created']])
    assert.throws(
      () => endpointTypes(bad),
      /^InvalidEndpointError: types must be a non-empty list/,
      JSON.stringify(bad),
    );
  assert.equal(subscribesTo(['*'], 'order.cancelled'), true);
  assert.equal(subscribesTo(['pet.created'], 'pet.created'), true);
  assert.equal(subscribesTo(['pet.created'], 'order.placed'), false);
});

test('when an endpoint URL is checked, then http(s), no user info or fragment, at most 2,048 characters, no literal private address', () => {
  const policy = new NetworkPolicy();
  const refused = (url: string, why: RegExp) =>
    assert.throws(
      () => checkEndpointUrl(url, policy),
      (error: unknown) => error instanceof InvalidEndpointError && why.test(error.message),
      url,
    );
  assert.equal(
    checkEndpointUrl('https://hooks.example.com/in?x=1', policy),
    'https://hooks.example.com/in?x=1',
  );
  assert.equal(checkEndpointUrl('http://[2606:4700::1]:8080/', policy), 'http://[2606:4700::1]:8080/');
  const long = `https://example.com/${'a'.repeat(2048 - 20)}`;
  assert.equal(checkEndpointUrl(long, policy), long);
  refused(`${long}a`, /^url must be at most 2048 characters$/);
  refused('not a url', /^url must be an absolute http: or https: URL$/);
  refused('ftp://example.com/', /^url must be an absolute http: or https: URL$/);
  refused('https://user:pw@example.com/', /^url must not contain user information$/);
  refused('https://user@example.com/', /^url must not contain user information$/);
  refused('https://example.com/#', /^url must not contain a fragment$/);
  for (const host of ['127.0.0.1', '[::1]', '[::127.0.0.1]', '[64:ff9b::a00:1]'])
    refused(`http://${host}/`, /^url must not point to a private, loopback/);
  // A host name is judged when connecting, on what it resolves to.
  assert.equal(checkEndpointUrl('http://localhost/', policy), 'http://localhost/');
});

test('when an attempt ends, then its outcome follows the answer: a 2xx succeeds, a 410 is gone, another status or no answer is tried again on the schedule, and a recovery attempts once', () => {
  const delivery = {
    endpointId: 1n,
    eventId: 7n,
    attempts: 0,
    trigger: 'schedule' as const,
    url: 'https://hooks.example.com/',
    secrets: ['whsec_x'],
    body: '{}',
    eventType: 'pet.created' as const,
    cause: undefined,
    occurredAt: new Date(0),
    leaseUntil: new Date(60_000),
  };
  const timing = { startedAt: new Date(1_000), at: new Date(1_250), seconds: 0.25 };
  const outcome = (answer: AttemptAnswer, trigger: AttemptTrigger = 'schedule') =>
    attemptOutcome({ ...delivery, trigger }, answer, timing, [5_000], () => 0.5);
  const ok = outcome({ answered: true, status: 204, body: '' });
  assert.deepEqual(
    [ok.succeeded, ok.gone, ok.error, ok.nextAttemptAt, ok.durationMs, ok.responseStatus],
    [true, false, undefined, undefined, 250, 204],
  );
  const gone = outcome({ answered: true, status: 410, body: 'bye' });
  assert.deepEqual(
    [gone.succeeded, gone.gone, gone.nextAttemptAt, gone.error],
    [false, true, undefined, 'HTTP 410: bye'],
  );
  const down = outcome({ answered: true, status: 503, body: 'x'.repeat(2_000) });
  assert.equal(down.error?.length, 1_024 + 16, 'the error keeps at most 1 KiB of the answer');
  assert.ok(down.nextAttemptAt && down.nextAttemptAt.getTime() > timing.at.getTime(), 'tried again later');
  const silent = outcome({ answered: false, error: 'connection refused' });
  assert.deepEqual(
    [silent.noAnswer, silent.error, silent.responseStatus, silent.responseBody],
    ['connection refused', 'connection refused', undefined, undefined],
  );
  assert.equal(outcome({ answered: true, status: 503, body: '' }, 'recover').nextAttemptAt, undefined);
  assert.ok(outcome({ answered: true, status: 503, body: '' }, 'retry').nextAttemptAt);
});
