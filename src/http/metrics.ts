import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { Type } from 'typebox';
import type { Storage } from '../storage/storage.js';
import { response } from './schemas/responses.js';

const LABELS = ['method', 'route', 'status'] as const;
type Label = (typeof LABELS)[number];

/** What operators scrape at GET /metrics, in Prometheus text format. */
export class ServiceMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'petstore_http_requests_total',
    help: 'HTTP requests answered, by method, route template and status.',
    labelNames: LABELS,
    registers: [this.registry],
  });
  readonly duration = new Histogram({
    name: 'petstore_http_request_duration_seconds',
    help: 'Time from request received to response sent, by method, route template and status.',
    labelNames: LABELS,
    // Fine-grained below 10 ms, where this service should live.
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
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
  readonly storageErrors = new Counter({
    name: 'petstore_storage_errors_total',
    help: 'Storage operations that failed, by operation.',
    labelNames: ['operation'],
    registers: [this.registry],
  });

  constructor(storage: Storage) {
    collectDefaultMetrics({ register: this.registry, prefix: 'petstore_' });
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
  }

  /** The same storage, with every failed operation counted. */
  instrument(storage: Storage): Storage {
    return {
      pets: countFailures(storage.pets, 'pets', this.storageErrors),
      apiKeys: countFailures(storage.apiKeys, 'apiKeys', this.storageErrors),
      idempotency: countFailures(storage.idempotency, 'idempotency', this.storageErrors),
      schema: storage.schema,
      sharedSecret: (name) => storage.sharedSecret(name),
      ping: () => storage.ping(),
      analyze: () => storage.analyze(),
      close: () => storage.close(),
    };
  }
}

function countFailures<T extends object>(target: T, area: string, counter: Counter<'operation'>): T {
  const wrappers = new Map<PropertyKey, unknown>();
  return new Proxy(target, {
    get(object, property) {
      const value = Reflect.get(object, property);
      if (typeof value !== 'function') return value;
      let wrapper = wrappers.get(property);
      if (!wrapper) {
        const operation = `${area}.${String(property)}`;
        const count = (error: unknown) => {
          counter.inc({ operation });
          throw error;
        };
        // Not an async function: that would add a promise and two turns to every storage call.
        wrapper = (...args: unknown[]) => {
          try {
            const result = value.apply(object, args);
            return result instanceof Promise ? result.catch(count) : result;
          } catch (error) {
            return count(error);
          }
        };
        wrappers.set(property, wrapper);
      }
      return wrapper;
    },
  });
}

/** Records every response and serves GET /metrics (no key: it sits outside /v1). */
export function registerMetrics(app: FastifyInstance, metrics: ServiceMetrics): void {
  // The labelled series of each (method, route, status), looked up once: prom-client otherwise hashes
  // the label object on every call (2.5% of a `get`'s CPU in the benchmark's profile).
  const series = new Map<string, { requests: Counter.Internal; duration: Histogram.Internal<Label> }>();
  app.addHook('onResponse', (request, reply, done) => {
    const method = request.method;
    // The template, never the raw URL: one series per route, whatever the ids and queries.
    const route = request.routeOptions.url ?? 'unmatched';
    const status = reply.statusCode;
    const name = `${method} ${route} ${status}`;
    let labelled = series.get(name);
    if (!labelled) {
      const labels = { method, route, status: String(status) };
      labelled = { requests: metrics.requests.labels(labels), duration: metrics.duration.labels(labels) };
      series.set(name, labelled);
    }
    labelled.requests.inc();
    labelled.duration.observe(reply.elapsedTime / 1000);
    if (status === 429) metrics.rateLimited.inc();
    done();
  });

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
    async (_request, reply) =>
      reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()),
  );
}
