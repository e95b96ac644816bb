import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { getHeapStatistics } from 'node:v8';
import { ConfigError, loadConfig, openFileLimit } from '../../src/config/config.js';

test('when no limit is configured, then the defaults apply: 100/s with a burst of 200, in memory, 1 s loop delay, 90% of the heap, 10 s and 30 s timeouts', () => {
  const config = loadConfig({});
  assert.deepEqual(config.rateLimit, { perSecond: 100, burst: 200 });
  assert.equal(config.redisUrl, undefined);
  assert.deepEqual(config.overload, {
    maxEventLoopDelayMs: 1000,
    maxHeapUsedBytes: Math.floor(getHeapStatistics().heap_size_limit * 0.9),
  });
  assert.equal(config.headersTimeoutMs, 10_000);
  assert.equal(config.requestTimeoutMs, 30_000);
  // Half of `ulimit -n`, as the shell reports it for this very process's limits.
  const limit = Number(execFileSync('/bin/sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim());
  assert.equal(openFileLimit(), limit);
  assert.equal(config.maxConnections, Math.floor(limit / 2));
});

test('when the limits are set, then they are read as given, MiB turned into bytes', () => {
  const config = loadConfig({
    RATE_LIMIT_PER_SECOND: '0.5',
    RATE_LIMIT_BURST: '7',
    REDIS_URL: 'redis://cache.internal:6380/2',
    OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
    OVERLOAD_MAX_HEAP_USED_MB: '512',
    HEADERS_TIMEOUT_MS: '2000',
    REQUEST_TIMEOUT_MS: '5000',
    MAX_CONNECTIONS: '300',
  });
  assert.deepEqual(config.rateLimit, { perSecond: 0.5, burst: 7 });
  assert.equal(config.redisUrl, 'redis://cache.internal:6380/2');
  assert.deepEqual(config.overload, { maxEventLoopDelayMs: 0, maxHeapUsedBytes: 512 * 1024 * 1024 });
  assert.equal(config.headersTimeoutMs, 2000);
  assert.equal(config.requestTimeoutMs, 5000);
  assert.equal(config.maxConnections, 300);
});

for (const [variable, value] of [
  ['RATE_LIMIT_PER_SECOND', '-1'],
  ['RATE_LIMIT_PER_SECOND', 'fast'],
  ['RATE_LIMIT_BURST', '0'],
  ['RATE_LIMIT_BURST', '1.5'],
  ['REDIS_URL', 'http://127.0.0.1:6379'],
  ['OVERLOAD_MAX_EVENT_LOOP_DELAY_MS', '-5'],
  ['OVERLOAD_MAX_HEAP_USED_MB', 'lots'],
  ['HEADERS_TIMEOUT_MS', '10'],
  ['REQUEST_TIMEOUT_MS', 'never'],
  ['MAX_CONNECTIONS', '-1'],
  ['MAX_CONNECTIONS', 'many'],
] as const) {
  test(`when ${variable}=${value}, then the start is refused with a ConfigError naming ${variable}`, () => {
    assert.throws(
      () => loadConfig({ [variable]: value }),
      (error: unknown) => error instanceof ConfigError && error.message.includes(variable),
    );
  });
}

test('when the database and failed-authentication limits are not configured, then the README defaults apply: a pool of 10, a 5 s bound, 30 failed authentications a minute', () => {
  const config = loadConfig({});
  assert.equal(config.databasePoolSize, 10);
  assert.equal(config.databaseTimeoutMs, 5_000);
  // 30 a minute, at once or spread out: a burst of 30, refilled at half a token a second.
  assert.deepEqual(config.authFailures, { perSecond: 0.5, burst: 30 });
});
