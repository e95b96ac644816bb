import assert from 'node:assert/strict';
import type { Worker } from 'node:cluster';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { ClusterMetrics } from '../../src/cluster-metrics.js';
import { METRICS_COLLECTED } from '../../src/http/observability/metrics.js';

/**
 * The primary's aggregate of its workers' metrics, in process: each worker a stand-in that sends its
 * figures as a real one does (a METRICS_COLLECTED message) and is no longer connected, so a scrape uses
 * the last figures it sent without asking again.
 */

/** A worker's registry with these figures, as JSON, the form it sends over IPC. */
async function figures(requests: number, seconds: number[], residentBytes: number) {
  const registry = new Registry();
  new Counter({ name: 'petstore_http_requests_total', help: 'requests', registers: [registry] }).inc(
    requests,
  );
  const histogram = new Histogram({
    name: 'petstore_http_request_duration_seconds',
    help: 'durations',
    buckets: [0.1, 1],
    registers: [registry],
  });
  for (const value of seconds) histogram.observe(value);
  new Gauge({ name: 'petstore_process_resident_memory_bytes', help: 'rss', registers: [registry] }).set(
    residentBytes,
  );
  new Gauge({
    name: 'petstore_webhook_backlog',
    help: 'backlog',
    aggregator: 'max',
    registers: [registry],
  }).set(residentBytes / 1000);
  return registry.getMetricsAsJSON();
}

/** A worker that has sent these figures and is not connected (a scrape does not ask it). */
function workerThatSent(metrics: unknown): Worker {
  const worker = Object.assign(new EventEmitter(), { isConnected: () => false, send: () => true });
  const cast = worker as unknown as Worker;
  return Object.assign(cast, {
    announce: () => worker.emit('message', { type: METRICS_COLLECTED, id: 0, metrics }),
  });
}

const add = async (metrics: ClusterMetrics, slot: number, ...args: Parameters<typeof figures>) => {
  const worker = workerThatSent(await figures(...args));
  metrics.added(worker, slot);
  (worker as unknown as { announce(): void }).announce();
  return worker;
};

/** One sample line of the Prometheus text, by name and labels; undefined when absent. */
const sample = (text: string, line: RegExp) => {
  const match = new RegExp(`^${line.source} (\\S+)$`, 'm').exec(text);
  return match ? Number(match[1]) : undefined;
};

test('when two workers die one after the other, then their counters and histograms are still summed (10 + 12 = 22), and their gauges are gone', async () => {
  const metrics = new ClusterMetrics();
  const first = await add(metrics, 0, 10, [0.05, 0.5], 1000);
  const second = await add(metrics, 1, 12, [2], 2000);
  metrics.retired(first);
  metrics.retired(second);
  const text = await metrics.text();
  assert.equal(sample(text, /petstore_http_requests_total/), 22);
  assert.equal(sample(text, /petstore_http_request_duration_seconds_count/), 3);
  assert.equal(sample(text, /petstore_http_request_duration_seconds_bucket\{le="0.1"\}/), 1);
  assert.equal(sample(text, /petstore_http_request_duration_seconds_bucket\{le="1"\}/), 2);
  assert.equal(sample(text, /petstore_process_resident_memory_bytes\{worker="\d"\}/), undefined);
  assert.equal(sample(text, /petstore_webhook_backlog/), undefined);
});

test('when one worker died and two live, then the counters add all three; per-process gauges are per worker slot, others aggregated by their meaning', async () => {
  const metrics = new ClusterMetrics();
  const dead = await add(metrics, 0, 10, [0.5], 1000);
  metrics.retired(dead);
  metrics.retired(dead); // a second exit event for the same worker changes nothing
  await add(metrics, 0, 3, [0.5], 3000); // its replacement, in the same slot
  await add(metrics, 1, 4, [], 4000);
  const text = await metrics.text();
  assert.equal(sample(text, /petstore_http_requests_total/), 17);
  assert.equal(sample(text, /petstore_process_resident_memory_bytes\{worker="1"\}/), 3000);
  assert.equal(sample(text, /petstore_process_resident_memory_bytes\{worker="2"\}/), 4000);
  assert.equal(sample(text, /petstore_webhook_backlog/), 4, 'max, as that gauge declares');
  const start = sample(text, /petstore_process_start_time_seconds/);
  // This process's start, to the second (a worker's would be later).
  assert.ok(Math.abs((start ?? 0) - (Date.now() / 1000 - process.uptime())) <= 1, `start time ${start}`);
  assert.equal(metrics.contentType, 'text/plain; version=0.0.4; charset=utf-8');
});

test('when a message is not the figures, or a worker sent none before dying, then nothing changes', async () => {
  const metrics = new ClusterMetrics();
  const worker = await add(metrics, 0, 5, [], 1000);
  worker.emit('message', { type: 'something else', metrics: [] });
  worker.emit('message', { type: METRICS_COLLECTED });
  const silent = workerThatSent([]);
  metrics.added(silent, 1);
  metrics.retired(silent);
  metrics.retired(workerThatSent([]));
  const text = await metrics.text();
  assert.equal(sample(text, /petstore_http_requests_total/), 5);
  assert.equal(sample(text, /petstore_process_resident_memory_bytes\{worker="1"\}/), 1000);
});
