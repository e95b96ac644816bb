import cluster from 'node:cluster';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { Type } from 'typebox';
import { StorageUnavailableError } from '../../domain/errors.js';
import type { Storage } from '../../domain/storage.js';
import type { PendingDeliveries } from '../../domain/webhooks.js';
import { type StorageBoundaryJobs, storageBoundary } from '../../storage/boundary.js';
import { type ReplicaReads, replicaReads } from '../../storage/replica-reads.js';
import { NODE_VERSION, VERSION } from '../../version.js';
import type { GuardedServer } from '../connection/connections.js';
import { EVENT_STREAM_TYPE } from '../routes/event-stream.js';
import { response } from '../schemas/responses.js';
import { RequestMetrics } from './request-metrics.js';
import type { StorageOutage } from './storage-outage.js';

/** One database query answers both webhook gauges of a scrape. */
const PENDING_MAX_AGE_MS = 1_000;
/** How long a scrape waits for those figures before showing the last ones. */
const PENDING_WAIT_MS = 500;

/** What operators scrape at GET /metrics, in Prometheus text format. */
export class ServiceMetrics {
  readonly registry = new Registry();
  /** petstore_http_requests_total and petstore_http_request_duration_seconds. */
  readonly requests = new RequestMetrics(this.registry);
  readonly rateLimited = new Counter({
    name: 'petstore_rate_limited_total',
    help: 'Requests refused with 429 rate_limited.',
    registers: [this.registry],
  });
  readonly rateLimitFailOpen = new Counter({
    name: 'petstore_rate_limit_fail_open_total',
    help: 'Requests let through unlimited because the rate limiter (Redis) could not be asked.',
    registers: [this.registry],
  });
  readonly redisErrors = new Counter({
    name: 'petstore_redis_errors_total',
    help: 'Failures of the Redis connection (source="connection": each failed connect or reconnect) and of the read replicas\' write positions kept there (source="write_positions": each command); rate limits count theirs in petstore_rate_limit_fail_open_total.',
    labelNames: ['source'],
    registers: [this.registry],
  });
  readonly storageErrors = new Counter({
    name: 'petstore_storage_errors_total',
    help: 'Storage operations that failed, by operation.',
    labelNames: ['operation'],
    registers: [this.registry],
  });

  readonly webhookDeliveries = new Counter({
    name: 'petstore_webhook_attempts_total',
    help: 'Webhook delivery attempts, by outcome: succeeded, retrying (failed, tried again later), failed (the last attempt failed).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly webhookAttemptDuration = new Histogram({
    name: 'petstore_webhook_attempt_duration_seconds',
    help: 'Time from sending a webhook delivery to its answer (or to its failure).',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly webhookDeliveryLag = new Histogram({
    name: 'petstore_webhook_delivery_lag_seconds',
    help: 'Time from an event occurring to the 2xx of its webhook delivery, retries included.',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600],
    registers: [this.registry],
  });
  readonly webhookEndpointsDisabled = new Counter({
    name: 'petstore_webhook_endpoints_disabled_total',
    help: 'Webhook endpoints disabled, by reason: failing (every delivery failed for WEBHOOK_DISABLE_AFTER) or gone (410).',
    labelNames: ['reason'],
    registers: [this.registry],
  });

  constructor(storage: Storage) {
    collectDefaultMetrics({ register: this.registry, prefix: 'petstore_' });
    // Under --workers each process has the same limit: one value, not a sum of them (cluster-metrics.ts).
    const maxFds = this.registry.getSingleMetric('petstore_process_max_fds') as
      | { aggregator?: string }
      | undefined;
    if (maxFds) maxFds.aggregator = 'max';
    // An info metric, always 1: which build runs, as labels. Under --workers every worker reports the same
    // build, so the primary keeps one value ('first') rather than the sum.
    new Gauge({
      name: 'petstore_build_info',
      help: 'The running build: its version (package.json) and the Node.js version; always 1.',
      labelNames: ['version', 'node'],
      aggregator: 'first',
      registers: [this.registry],
    }).set({ version: VERSION, node: NODE_VERSION }, 1);
    // The database's figures, the same seen from any process: under --workers, one value is kept, not
    // the sum. One query per scrape for both; a database that does not answer within half a second
    // leaves the last figures in place rather than failing the scrape (metrics matter most in an outage).
    let last: PendingDeliveries = { count: 0, oldestAt: undefined };
    let asked: { at: number; figures: Promise<PendingDeliveries> } | undefined;
    const pending = (): Promise<PendingDeliveries> => {
      if (asked && Date.now() - asked.at < PENDING_MAX_AGE_MS) return asked.figures;
      const figures = Promise.race([
        storage.deliveries.pending().then((fresh) => {
          last = fresh;
          return fresh;
        }),
        new Promise<PendingDeliveries>((resolve) => setTimeout(() => resolve(last), PENDING_WAIT_MS).unref()),
      ]).catch(() => last);
      asked = { at: Date.now(), figures };
      return figures;
    };
    new Gauge({
      name: 'petstore_webhook_deliveries_pending',
      help: 'Webhook deliveries waiting for an attempt (due or scheduled), on every node.',
      aggregator: 'max',
      registers: [this.registry],
      async collect() {
        this.set((await pending()).count);
      },
    });
    new Gauge({
      name: 'petstore_webhook_oldest_pending_age_seconds',
      help: 'Age of the event of the oldest pending webhook delivery; 0 when none is pending.',
      aggregator: 'max',
      registers: [this.registry],
      async collect() {
        const { oldestAt } = await pending();
        this.set(oldestAt ? Math.max(0, (Date.now() - oldestAt.getTime()) / 1000) : 0);
      },
    });
    const { poolStats } = storage;
    if (poolStats) {
      new Gauge({
        name: 'petstore_db_pool_connections',
        help: 'Database pool connections, by state (total, idle, waiting clients).',
        labelNames: ['state'],
        registers: [this.registry],
        collect() {
          const stats = poolStats.call(storage);
          for (const state of ['total', 'idle', 'waiting'] as const) this.set({ state }, stats[state]);
        },
      });
    }
    const replicas = replicaReads(storage);
    if (replicas) this.#watchReplicas(replicas);
  }

  /** With replicas (DATABASE_REPLICA_URLS): where the API's reads went, each replica's lag and state. */
  #watchReplicas(replicas: ReplicaReads): void {
    const stats = () => replicas.stats();
    new Counter({
      name: 'petstore_db_reads_total',
      help: "The API's reads (GET, HEAD), by where they were served: a replica fresh enough for the caller, else the primary.",
      labelNames: ['target'],
      registers: [this.registry],
      collect() {
        const { reads } = stats();
        this.reset();
        this.inc({ target: 'primary' }, reads.primary);
        this.inc({ target: 'replica' }, reads.replica);
      },
    });
    new Gauge({
      name: 'petstore_db_replica_lag_seconds',
      help: 'How far each replica replay is behind the primary, as last probed (+Inf while not known).',
      labelNames: ['replica'],
      // Each worker probes on its own: the worst of their figures.
      aggregator: 'max',
      registers: [this.registry],
      collect() {
        this.reset();
        for (const replica of stats().replicas) this.set({ replica: replica.name }, replica.lagSeconds);
      },
    });
    new Gauge({
      name: 'petstore_db_replicas_set_aside',
      help: 'Replicas not used because they failed, did not answer or are not standbys; probed again after a few seconds.',
      aggregator: 'max',
      registers: [this.registry],
      collect() {
        this.set(stats().replicas.filter((replica) => replica.setAside).length);
      },
    });
  }

  /** The API port's open connections, and those closed on arrival because MAX_CONNECTIONS were open. */
  watchConnections(server: GuardedServer): void {
    const dropped = new Counter({
      name: 'petstore_http_connections_dropped_total',
      help: 'Client connections closed as they arrived because MAX_CONNECTIONS were already open.',
      registers: [this.registry],
    });
    server.on('drop', () => dropped.inc());
    new Gauge({
      name: 'petstore_http_connections',
      help: 'Client connections open on the API port (at most MAX_CONNECTIONS).',
      registers: [this.registry],
      collect() {
        this.set(server.openConnections);
      },
    });
  }

  /**
   * The same storage, with every failed operation counted, outages told to `outage`, and each call run
   * by `around` when given (tracing's spans): one wrapper per store doing all of it (boundary.ts).
   */
  instrument(storage: Storage, outage: StorageOutage, around?: StorageBoundaryJobs['around']): Storage {
    return storageBoundary(storage, {
      failed: (operation, error) => {
        this.storageErrors.inc({ operation });
        if (error instanceof StorageUnavailableError) outage.failed(error);
      },
      succeeded: () => {
        if (outage.active) outage.recovered();
      },
      ...(around ? { around } : {}),
    });
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The metrics as a scrape answers them (for the METRICS_PORT listener). */
    scrapeMetrics(): Promise<{ contentType: string; text: string }>;
  }
}

export interface MetricsEndpointOptions {
  metrics: ServiceMetrics;
  /** Whether GET /metrics is a route of the API; false when METRICS_PORT serves it apart. */
  route: boolean;
}

/**
 * Records every response and serves GET /metrics (no key: it sits outside /v1), unless a listener of
 * its own serves it (METRICS_PORT). A cluster worker always answers its primary's collections.
 */
export const metricsEndpoint = fp(
  async (app: FastifyInstance, { metrics, route }: MetricsEndpointOptions) => {
    if (cluster.isWorker) answerCollections(metrics.registry);
    const workerMetrics = cluster.isWorker && route ? askPrimaryForMetrics() : undefined;
    const scrape = async () => ({
      contentType: metrics.registry.contentType,
      text: await (workerMetrics ? workerMetrics() : metrics.registry.metrics()),
    });
    app.decorate('scrapeMetrics', scrape);
    app.addHook('onResponse', (request, reply, done) => {
      // A live event stream lasts as long as its client stays: no request latency (it has metrics of its own).
      if (reply.raw.getHeader('content-type') === EVENT_STREAM_TYPE) return done();
      const status = reply.statusCode;
      // The template, never the raw URL: one series per route, whatever the ids and queries.
      metrics.requests.record(
        request.method,
        request.routeOptions.url ?? 'unmatched',
        status,
        reply.elapsedTime / 1000,
      );
      if (status === 429) metrics.rateLimited.inc();
      done();
    });

    if (!route) return;
    app.get(
      '/metrics',
      {
        schema: {
          operationId: 'metrics',
          summary: 'Prometheus metrics',
          tags: ['operations'],
          security: [],
          servers: [{ url: '/', description: 'Outside /v1' }],
          produces: ['text/plain'],
          response: {
            200: response(
              'Metrics in the Prometheus text format',
              Type.String({
                examples: ['petstore_http_requests_total{method="GET",route="/v1/pets",status="200"} 42\n'],
              }),
            ),
          },
        },
      },
      async (_request, reply) => {
        const { contentType, text } = await scrape();
        return reply.type(contentType).send(text);
      },
    );
  },
  { name: 'metrics', fastify: '5.x' },
);

/** A worker's request to its primary for the metrics of every worker, aggregated; and the answer. */
export const METRICS_REQUEST = 'petstore:metrics-request';
export const METRICS_RESPONSE = 'petstore:metrics-response';
/** The primary's request to a worker for its own metrics (as JSON); and the answer. */
export const METRICS_COLLECT = 'petstore:metrics-collect';
export const METRICS_COLLECTED = 'petstore:metrics-collected';
/** The primary waits this long for the workers' figures; a scrape should not wait longer. */
const PRIMARY_TIMEOUT_MS = 6_000;

/** Sends this worker's own metrics to the primary whenever it collects them (cluster-metrics.ts). */
function answerCollections(registry: Registry): void {
  process.on('message', (message: { type?: unknown; id?: unknown }) => {
    if (message?.type !== METRICS_COLLECT) return;
    registry.getMetricsAsJSON().then(
      (metrics) => process.send?.({ type: METRICS_COLLECTED, id: message.id, metrics }),
      (error: Error) => process.send?.({ type: METRICS_COLLECTED, id: message.id, error: error.message }),
    );
  });
}

/**
 * Under `--workers`, a scrape lands on whichever worker accepted the connection: each answering with
 * its own counters would look to Prometheus like counters reset at every scrape. So a worker asks its
 * primary, which collects every worker's registry and aggregates them (cluster-metrics.ts).
 */
function askPrimaryForMetrics(): () => Promise<string> {
  const waiting = new Map<number, (text: string | Error) => void>();
  let nextId = 0;
  process.on('message', (message: { type?: unknown; id?: number; text?: string; error?: string }) => {
    if (message?.type !== METRICS_RESPONSE || message.id === undefined) return;
    waiting.get(message.id)?.(message.error === undefined ? (message.text ?? '') : new Error(message.error));
  });
  return () =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(
        () => settle(new Error('the primary did not send metrics')),
        PRIMARY_TIMEOUT_MS,
      );
      const settle = (text: string | Error) => {
        clearTimeout(timer);
        waiting.delete(id);
        if (text instanceof Error) reject(text);
        else resolve(text);
      };
      waiting.set(id, settle);
      process.send?.({ type: METRICS_REQUEST, id });
    });
}
