import assert from 'node:assert/strict';
import type { Worker } from 'node:cluster';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { ClusterMetrics } from '../../src/cluster-metrics.js';
import { METRICS_COLLECT, METRICS_COLLECTED } from '../../src/http/observability/metrics.js';

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

/**
 * A connected stand-in worker: each collection it is sent is recorded, then `answer` says what it does
 * (send its figures back, send something else, nothing…); `fail` makes the send itself fail.
 */
function connectedWorker(
  answer: (worker: EventEmitter, message: { type: string; id: number }) => void,
  fail?: Error,
): Worker & { asked: unknown[] } {
  const asked: unknown[] = [];
  const worker: EventEmitter & { asked: unknown[] } = Object.assign(new EventEmitter(), {
    asked,
    isConnected: () => true,
    send: (message: { type: string; id: number }, callback: (error: Error | null) => void) => {
      asked.push(message);
      setImmediate(() => {
        callback(fail ?? null);
        answer(worker, message);
      });
      return true;
    },
  });
  return worker as unknown as Worker & { asked: unknown[] };
}

/** Whether `promise` settled within a few turns of the event loop (no timer involved). */
async function settledSoon(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(() => {
    settled = true;
  });
  for (let turn = 0; turn < 10; turn++) await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

test('when a connected worker is scraped, then it is asked for its figures, each collection with an id of its own, and the scrape ends as soon as it answers (the clock stopped), with its figures', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => t.mock.timers.reset());
  const metrics = new ClusterMetrics();
  let requests = 5;
  const answering = (worker: EventEmitter, message: { id: number }) => {
    void figures(requests, [], 1000).then((sent) =>
      worker.emit('message', { type: METRICS_COLLECTED, id: message.id, metrics: sent }),
    );
  };
  const first = connectedWorker(answering);
  const second = connectedWorker(answering);
  metrics.added(first, 0);
  metrics.added(second, 1);
  const scraped = metrics.text();
  assert.equal(await settledSoon(scraped), true, 'ended by the answers, not by the 5 s bound');
  assert.equal(sample(await scraped, /petstore_http_requests_total/), 10);
  requests = 8;
  const again = metrics.text();
  assert.equal(await settledSoon(again), true);
  assert.equal(sample(await again, /petstore_http_requests_total/), 16);
  assert.deepEqual(
    [first.asked, second.asked],
    [
      [
        { type: METRICS_COLLECT, id: 0 },
        { type: METRICS_COLLECT, id: 2 },
      ],
      [
        { type: METRICS_COLLECT, id: 1 },
        { type: METRICS_COLLECT, id: 3 },
      ],
    ],
  );
  assert.deepEqual(
    [first.listenerCount('message'), first.listenerCount('exit')],
    [1, 0],
    'only the listener added() set remains',
  );
});

test('when a worker answers another collection, or with something else, then the scrape waits for it until 5 s (on a mocked clock), not a moment less, then uses its last figures', async (t) => {
  const metrics = new ClusterMetrics();
  const worker = connectedWorker((emitter, message) => {
    emitter.emit('message', null);
    emitter.emit('message', { type: 'something else', id: message.id });
    void figures(7, [], 1000).then((sent) =>
      emitter.emit('message', { type: METRICS_COLLECTED, id: message.id + 1, metrics: sent }),
    );
  });
  metrics.added(worker, 0);
  t.mock.timers.enable({ apis: ['setTimeout'] });
  try {
    const scraped = metrics.text();
    assert.equal(await settledSoon(scraped), false, 'still waiting');
    t.mock.timers.tick(4_999);
    assert.equal(await settledSoon(scraped), false, 'still waiting at 4,999 ms');
    t.mock.timers.tick(1);
    assert.equal(await settledSoon(scraped), true, 'given up at 5 s');
    assert.equal(sample(await scraped, /petstore_http_requests_total/), 7, 'the figures it sent last');
  } finally {
    t.mock.timers.reset();
  }
  assert.deepEqual([worker.listenerCount('message'), worker.listenerCount('exit')], [1, 0]);
});

test('when the collection cannot be sent, or the worker exits while asked, then the scrape ends at once with what it has; a send that succeeds waits for the answer', async () => {
  const failing = new ClusterMetrics();
  const unreachable = connectedWorker(() => {}, new Error('channel closed'));
  failing.added(unreachable, 0);
  const refused = failing.text();
  assert.equal(await settledSoon(refused), true);
  assert.equal(sample(await refused, /petstore_http_requests_total/), undefined, 'no figures yet');
  assert.deepEqual([unreachable.listenerCount('message'), unreachable.listenerCount('exit')], [1, 0]);

  const exiting = new ClusterMetrics();
  const silent = connectedWorker(() => {});
  exiting.added(silent, 0);
  const scraped = exiting.text();
  assert.equal(await settledSoon(scraped), false, 'sent, and waiting for its answer');
  silent.emit('exit', 1, null);
  assert.equal(await settledSoon(scraped), true, 'ended by the exit');
  assert.deepEqual([silent.listenerCount('message'), silent.listenerCount('exit')], [1, 0]);
});

/** The names of the samples in a Prometheus text, with their labels, and their values. */
const samples = (text: string) =>
  text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => line.split(' '))
    .map(([name, value]) => [name, Number(value)] as const);

test('when workers send process figures, then only the gauges summed by default and named petstore_process_ or petstore_nodejs_ are per worker; per-process counters are summed, other aggregators kept, and a worker’s own start time is the primary’s', async () => {
  const metrics = new ClusterMetrics();
  const processFigures = async (cpu: number, heap: number, fds: number, things: number) => {
    const registry = new Registry();
    new Counter({ name: 'petstore_process_cpu_seconds_total', help: 'cpu', registers: [registry] }).inc(cpu);
    new Gauge({ name: 'petstore_nodejs_heap_size_used_bytes', help: 'heap', registers: [registry] }).set(
      heap,
    );
    new Gauge({
      name: 'petstore_process_max_fds',
      help: 'fds',
      aggregator: 'max',
      registers: [registry],
    }).set(fds);
    new Gauge({ name: 'app_petstore_process_things', help: 'things', registers: [registry] }).set(things);
    new Gauge({
      name: 'petstore_process_start_time_seconds',
      help: 'start',
      aggregator: 'omit',
      registers: [registry],
    }).set(fds);
    return registry.getMetricsAsJSON();
  };
  for (const [slot, figures] of [
    [0, await processFigures(1.5, 100, 1024, 2)],
    [1, await processFigures(2.5, 300, 4096, 3)],
  ] as const) {
    const worker = workerThatSent(figures);
    metrics.added(worker, slot);
    (worker as unknown as { announce(): void }).announce();
  }
  const [start, ...rest] = samples(await metrics.text());
  assert.equal(start?.[0], 'petstore_process_start_time_seconds');
  // This process's start, to the second (not a worker's 1024 or 4096).
  assert.ok(Math.abs((start?.[1] ?? 0) - (Date.now() / 1000 - process.uptime())) <= 1, `start time ${start}`);
  assert.deepEqual(rest, [
    ['petstore_process_cpu_seconds_total', 4],
    ['petstore_nodejs_heap_size_used_bytes{worker="1"}', 100],
    ['petstore_nodejs_heap_size_used_bytes{worker="2"}', 300],
    ['petstore_process_max_fds', 4096],
    ['app_petstore_process_things', 5],
  ]);
});

test('when a living worker has sent no figures yet, then a scrape shows the primary’s start time alone; a message after a worker died changes nothing', async () => {
  const metrics = new ClusterMetrics();
  const silent = workerThatSent([]);
  metrics.added(silent, 0);
  assert.deepEqual(
    samples(await metrics.text()).map(([name]) => name),
    ['petstore_process_start_time_seconds'],
  );
  const late = await add(metrics, 1, 4, [], 1000);
  metrics.retired(late);
  late.emit('message', { type: METRICS_COLLECTED, id: 0, metrics: await figures(50, [], 1000) });
  assert.equal(
    sample(await metrics.text(), /petstore_http_requests_total/),
    4,
    'its last figures before it died',
  );
});
