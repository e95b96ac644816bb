import type { Worker } from 'node:cluster';
import {
  AggregatorRegistry,
  Gauge,
  type MetricObjectWithValues,
  type MetricValue,
  Registry,
} from 'prom-client';
import { METRICS_COLLECT, METRICS_COLLECTED } from './http/observability/metrics.js';

type Metrics = MetricObjectWithValues<MetricValue<string>>[];

/** How long the primary waits for one worker's figures before using the last ones it sent. */
const COLLECT_TIMEOUT_MS = 5_000;
const START_TIME = 'petstore_process_start_time_seconds';
/** The process figures a sum would misstate (shared pages, one heap each): shown per worker instead. */
const PER_PROCESS = /^petstore_(process|nodejs)_/;

/**
 * The metrics of `serve --workers N`, as the primary answers a scrape: every worker's registry (asked
 * over IPC at each scrape) aggregated by each metric's meaning. Counters and histograms are summed and
 * never go backwards: a dead worker's last figures are kept and added to the living ones' for as long
 * as the primary runs (what it counted after the last scrape before it died is lost). Gauges take
 * their metric's aggregator (max for process_max_fds, the first for build and version info); the
 * per-process ones (memory, heap, handles, file descriptors) carry a `worker` label, the worker's
 * slot from 1 to N, kept by its replacement. process_start_time_seconds is the primary's: the
 * instant from which its counters count.
 */
export class ClusterMetrics {
  readonly #own = new Registry();
  /** The figures each living worker last sent, with its slot label. */
  readonly #last = new Map<Worker, { slot: string; metrics: Metrics }>();
  /** Counters and histograms of every worker that died, summed. */
  #retired: Metrics = [];
  #nextId = 0;

  constructor() {
    new Gauge({
      name: START_TIME,
      help: 'Start time of the process since unix epoch in seconds.',
      aggregator: 'first',
      registers: [this.#own],
    }).set(Math.round(Date.now() / 1000 - process.uptime()));
  }

  /** A worker that started in `slot` (from 0). */
  added(worker: Worker, slot: number): void {
    this.#last.set(worker, { slot: String(slot + 1), metrics: [] });
    worker.on('message', (message: { type?: unknown; id?: unknown; metrics?: Metrics }) => {
      if (message?.type !== METRICS_COLLECTED || !message.metrics) return;
      const entry = this.#last.get(worker);
      if (entry) entry.metrics = message.metrics;
    });
  }

  /** A worker died: its counters and histograms stay in the sums, its gauges go. */
  retired(worker: Worker): void {
    const entry = this.#last.get(worker);
    this.#last.delete(worker);
    if (!entry) return;
    const kept = entry.metrics.filter((metric) => ['counter', 'histogram'].includes(typeOf(metric)));
    this.#retired = toJson(AggregatorRegistry.aggregate([this.#retired, kept]));
  }

  /** Collects every living worker's figures, then answers in the Prometheus text format. */
  async text(): Promise<string> {
    await Promise.all([...this.#last.keys()].map((worker) => this.#collect(worker)));
    const living = [...this.#last.values()].map(({ slot, metrics }) => perWorker(metrics, slot));
    const own = await this.#own.getMetricsAsJSON();
    return AggregatorRegistry.aggregate([own as Metrics, this.#retired, ...living]).metrics();
  }

  get contentType(): string {
    return this.#own.contentType;
  }

  /** Asks one worker for its figures; resolves when they arrived, or it died, or after a bound. */
  #collect(worker: Worker): Promise<void> {
    if (!worker.isConnected()) return Promise.resolve();
    const id = this.#nextId++;
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        worker.off('message', onMessage);
        worker.off('exit', done);
        resolve();
      };
      const onMessage = (message: { type?: unknown; id?: unknown }) => {
        if (message?.type === METRICS_COLLECTED && message.id === id) done();
      };
      const timer = setTimeout(done, COLLECT_TIMEOUT_MS);
      worker.on('message', onMessage);
      worker.once('exit', done);
      worker.send({ type: METRICS_COLLECT, id }, (error: Error | null) => {
        if (error) done();
      });
    });
  }
}

/** A worker's figures as the aggregate takes them: its start time left to the primary, slots labelled. */
function perWorker(metrics: Metrics, slot: string): Metrics {
  return metrics
    .filter((metric) => metric.name !== START_TIME)
    .map((metric) =>
      typeOf(metric) === 'gauge' && metric.aggregator === 'sum' && PER_PROCESS.test(metric.name)
        ? {
            ...metric,
            values: metric.values.map((value) => ({ ...value, labels: { ...value.labels, worker: slot } })),
          }
        : metric,
    );
}

/** The metrics of an aggregated registry as JSON again (they are plain objects: no collection runs). */
function toJson(registry: Registry): Metrics {
  return registry
    .getMetricsAsArray()
    .map((metric) => (metric as unknown as { get(): Metrics[number] }).get());
}

/** The type as it travels (prom-client declares an enum but sends its string value). */
const typeOf = (metric: Metrics[number]): string => metric.type as unknown as string;
