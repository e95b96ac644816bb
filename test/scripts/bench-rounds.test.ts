import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Run, renderHeadline, renderReport } from '../../bench/report.js';
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

test('when a run was measured in rounds, then its report and headline say how: rounds of --seconds, the targets taking turns', () => {
  const run = (rounds?: number, neighbour?: string): Run => ({
    date: '2026-11-27T00:00:00.000Z',
    command: 'npm run bench',
    machine: { nproc: 2, memoryGiB: 24, cpu: 'test', node: 'v20' },
    workers: 1,
    connections: 32,
    seconds: 4,
    ...(rounds ? { rounds } : {}),
    ...(neighbour ? { neighbour } : {}),
    rows: [],
    bareQueries: {},
  });
  assert.match(
    renderReport(run(3)),
    /32 connections, 3 rounds of 4 s per target, the targets taking turns, 1 worker/,
  );
  assert.match(renderReport(run()), /32 connections, 4 s per run, 1 worker/);
  assert.match(
    renderHeadline(run(3), run(3, 'a busy loop')),
    /32 connections, 3 rounds of 4 s per target, the targets taking turns\./,
  );
  assert.match(renderHeadline(run(), run(undefined, 'a busy loop')), /32 connections, 4 s per target\./);
});
