import assert from 'node:assert/strict';
import { test } from 'node:test';
import { combineWindows, type Window } from '../../bench/rounds.js';

const window = (
  requests: number,
  seconds: number,
  cpuMicros: number,
  extra: Partial<Window> = {},
): Window => ({
  requests,
  requestsPerSecond: requests / seconds,
  p50: 1,
  p99: 2,
  non2xx: 0,
  generatorCpuMicros: requests * 10,
  wallMicros: seconds * 1e6,
  peakRss: 100,
  cpuMicros,
  ...extra,
});

test('when the windows of several rounds are combined, then CPU per request is the total over the total: a slow window weighs what it served', () => {
  // 1,000 requests at 50 µs, then 500 at 200 µs: 150,000 µs over 1,500 requests, 100 µs each (not 125).
  const combined = combineWindows([window(1000, 2, 50_000), window(500, 2, 100_000)]);
  assert.equal(combined.requests, 1500);
  assert.equal(combined.cpuMicros, 150_000);
  assert.equal(combined.cpuMicros / combined.requests, 100);
  assert.equal(combined.requestsPerSecond, 375); // 1,500 requests in 4 s
  assert.equal(combined.wallMicros, 4e6);
  assert.equal(combined.generatorCpuMicros, 15_000);
});

test('when windows are combined, then the p50 is their median, the p99 the worst, errors summed and memory the highest', () => {
  const combined = combineWindows([
    window(100, 1, 1, { p50: 3, p99: 9, non2xx: 1, peakRss: 120 }),
    window(100, 1, 1, { p50: 1, p99: 40, non2xx: 0, peakRss: 300 }),
    window(100, 1, 1, { p50: 2, p99: 10, non2xx: 2, peakRss: 200 }),
  ]);
  assert.deepEqual([combined.p50, combined.p99, combined.non2xx, combined.peakRss], [2, 40, 3, 300]);
  assert.equal(combineWindows([window(1, 1, 1, { p50: 1 }), window(1, 1, 1, { p50: 4 })]).p50, 2.5);
});

test('when windows are combined, then webhook deliveries are summed, and absent when a window did not count them', () => {
  assert.equal(
    combineWindows([window(10, 1, 1, { delivered: 3 }), window(10, 1, 1, { delivered: 4 })]).delivered,
    7,
  );
  assert.equal('delivered' in combineWindows([window(10, 1, 1)]), false);
  assert.throws(() => combineWindows([]), /no window/);
});
