import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.js';

/** The event and webhook settings: their documented defaults, and a clear refusal of bad values. */

test('when no event or webhook setting is given, then the documented defaults apply', () => {
  const config = loadConfig({});
  assert.equal(config.eventRetentionDays, 30);
  assert.equal(config.webhooks.timeoutMs, 10_000);
  assert.deepEqual(
    config.webhooks.retrySchedule,
    [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
  );
  assert.equal(config.webhooks.disableAfterMs, 5 * 86_400_000);
  assert.equal(config.webhooks.concurrencyPerEndpoint, 4);
  // No network beyond the public ones.
  for (const address of [
    '127.0.0.1',
    '10.1.2.3',
    '169.254.169.254',
    '::1',
    'fd00::1',
    '::ffff:10.0.0.1',
    '100.64.1.1',
  ])
    assert.equal(config.webhooks.policy.permits(address), false, address);
  for (const address of ['93.184.215.14', '2606:4700::1111', '::ffff:93.184.215.14'])
    assert.equal(config.webhooks.policy.permits(address), true, address);
});

test('when WEBHOOK_DELIVERY_SHARE, a removed setting, is still set, then the start is refused naming it and what replaced it', () => {
  assert.throws(
    () => loadConfig({ WEBHOOK_DELIVERY_SHARE: '0.35' }),
    (error: Error) =>
      error instanceof ConfigError &&
      error.message ===
        "invalid configuration: WEBHOOK_DELIVERY_SHARE: it was removed: in --role all, deliveries run on a thread of their own, with their own event loop and database connection, and need no share of the API's; unset it",
  );
  assert.equal(loadConfig({}).webhooks.concurrencyPerEndpoint, 4, 'unset, nothing is refused');
});

test('when networks are allowed, then addresses inside them are permitted and others still refused', () => {
  const { policy } = loadConfig({ WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8, fd00::/8' }).webhooks;
  assert.equal(policy.permits('127.0.0.1'), true);
  assert.equal(policy.permits('::ffff:127.0.0.1'), true);
  assert.equal(policy.permits('fd00::7'), true);
  assert.equal(policy.permits('10.0.0.1'), false);
  assert.equal(policy.permits('fe80::1'), false);
});

test('when a setting is bad, then the start stops with one message naming it', () => {
  for (const [name, value, message] of [
    [
      'WEBHOOK_ALLOWED_NETWORKS',
      '10.0.0.0/33',
      /WEBHOOK_ALLOWED_NETWORKS: "10\.0\.0\.0\/33" is not a network in CIDR notation/,
    ],
    ['WEBHOOK_ALLOWED_NETWORKS', 'localhost', /WEBHOOK_ALLOWED_NETWORKS must be CIDR ranges/],
    ['WEBHOOK_RETRY_SCHEDULE', '5s,,5m', /WEBHOOK_RETRY_SCHEDULE must be durations separated by commas/],
    ['WEBHOOK_RETRY_SCHEDULE', '5 seconds', /WEBHOOK_RETRY_SCHEDULE must be durations separated by commas/],
    ['WEBHOOK_DISABLE_AFTER', 'soon', /WEBHOOK_DISABLE_AFTER must be a duration such as 5d/],
    ['WEBHOOK_TIMEOUT_MS', '50', /WEBHOOK_TIMEOUT_MS must be an integer from 100 to 120000/],
    [
      'WEBHOOK_CONCURRENCY_PER_ENDPOINT',
      '0',
      /WEBHOOK_CONCURRENCY_PER_ENDPOINT must be an integer from 1 to 64/,
    ],
    ['EVENT_RETENTION_DAYS', '0', /EVENT_RETENTION_DAYS must be an integer from 1 to 36500/],
  ] as const) {
    assert.throws(
      () => loadConfig({ [name]: value }),
      (error: unknown) => error instanceof ConfigError && message.test(error.message),
      `${name}=${value}`,
    );
  }
});
