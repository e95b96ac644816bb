import type { Registry } from 'prom-client';

const LABELS = ['method', 'route', 'status'] as const;
type Labels = Record<(typeof LABELS)[number], string>;

/** Upper bounds of the duration histogram, in seconds: fine-grained below 10 ms, where this service should live. */
export const DURATION_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

interface Series {
  labels: Labels;
  count: number;
  /** Seconds, summed. */
  sum: number;
  /** Answers whose duration fell in each bucket (not cumulative); the last one is +Inf's. */
  inBucket: number[];
}

/** A metric as prom-client's Registry reads it (the shape its own metrics' get() returns). */
interface MetricView {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  get(): Promise<{
    name: string;
    help: string;
    type: string;
    aggregator: string;
    values: { labels: Record<string, string | number>; value: number; metricName?: string }[];
  }>;
  reset(): void;
}

/**
 * `petstore_http_requests_total` and `petstore_http_request_duration_seconds`, counted on the request
 * path in plain numbers, one series per (method, route, status) found once by a string key, and put in
 * Prometheus' form only when scraped. prom-client's own labelled counter and histogram check and hash
 * their label object on every inc() and observe() (a microsecond a request in a tight loop, and
 * garbage); these two are read through the same Registry, in the same text and JSON, so scrapes and
 * the aggregation under --workers (cluster-metrics.ts) see no difference.
 */
export class RequestMetrics {
  readonly #series = new Map<string, Series>();

  constructor(registry: Registry) {
    const requests: MetricView = {
      name: 'petstore_http_requests_total',
      help: 'HTTP requests answered, by method, route template and status.',
      type: 'counter',
      aggregator: 'sum',
      get: async () => ({
        ...this.#header(requests),
        values: [...this.#series.values()].map(({ labels, count }) => ({ labels, value: count })),
      }),
      reset: () => this.#series.clear(),
    };
    const duration: MetricView = {
      name: 'petstore_http_request_duration_seconds',
      help: 'Time from request received to response sent, by method, route template and status.',
      type: 'histogram',
      aggregator: 'sum',
      get: async () => ({ ...this.#header(duration), values: this.#histogramValues(duration.name) }),
      reset: () => this.#series.clear(),
    };
    // The Registry takes any object of this shape; its type names prom-client's own classes only.
    for (const view of [requests, duration]) registry.registerMetric(view as never);
  }

  /** One answered request: its method, route template ('unmatched' for none), status and duration. */
  record(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${route} ${status}`;
    let series = this.#series.get(key);
    if (series === undefined) {
      series = {
        labels: { method, route, status: String(status) },
        count: 0,
        sum: 0,
        inBucket: new Array(DURATION_BUCKETS.length + 1).fill(0),
      };
      this.#series.set(key, series);
    }
    series.count++;
    series.sum += seconds;
    let bucket = 0;
    while (bucket < DURATION_BUCKETS.length && seconds > (DURATION_BUCKETS[bucket] as number)) bucket++;
    (series.inBucket[bucket] as number)++;
  }

  #header(view: MetricView) {
    return { name: view.name, help: view.help, type: view.type, aggregator: view.aggregator };
  }

  /** As prom-client writes a histogram: cumulative buckets with `le`, +Inf, then _sum and _count. */
  #histogramValues(name: string) {
    return [...this.#series.values()].flatMap(({ labels, count, sum, inBucket }) => {
      let cumulative = 0;
      const buckets = DURATION_BUCKETS.map((le, i) => {
        cumulative += inBucket[i] as number;
        return { labels: { le, ...labels }, value: cumulative, metricName: `${name}_bucket` };
      });
      return [
        ...buckets,
        { labels: { le: '+Inf', ...labels }, value: count, metricName: `${name}_bucket` },
        { labels, value: sum, metricName: `${name}_sum` },
        { labels, value: count, metricName: `${name}_count` },
      ];
    });
  }
}
