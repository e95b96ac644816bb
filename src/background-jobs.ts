import type { FastifyInstance } from 'fastify';
import type { Config } from './config/config.js';
import { type ApiKeyLastUse, LAST_USE_FLUSH_MS } from './domain/api-key-last-use.js';
import type { Storage } from './domain/storage.js';
import { DRAIN_GRACE_MS } from './http/connection/connections.js';
import type { ServiceMetrics } from './http/observability/metrics.js';
import type { Tracing } from './tracing/tracing.js';
import type { DelivererMetrics } from './webhooks/attempt.js';
import { DeliveryThread } from './webhooks/delivery-thread.js';
import { newDeliverer } from './webhooks/new-deliverer.js';

// The work a node does off the request path, each job tied to the app's life by its hooks: started at
// onReady (or at once), stopped at onClose. buildApp calls each where it has what the job needs.

/** What deliveries count, into this process's /metrics. */
const deliveryMetrics = (metrics: ServiceMetrics): DelivererMetrics => ({
  attempted: (outcome, seconds) => {
    metrics.webhookDeliveries.inc({ outcome });
    metrics.webhookAttemptDuration.observe(seconds);
  },
  disabled: (reason) => metrics.webhookEndpointsDisabled.inc({ reason }),
  delivered: (lagSeconds) => metrics.webhookDeliveryLag.observe(lagSeconds),
});

/**
 * A node in the `all` or `deliver` role delivers webhooks, off the request path. On close it takes no new attempt and lets those
 * under way finish within the drain's grace, giving back the leases of any still running.
 */
export function deliverInBackground(
  app: FastifyInstance,
  config: Config,
  storage: Storage,
  metrics: ServiceMetrics,
  now: () => Date,
  tracing: Tracing | undefined,
): void {
  const deliverer = newDeliverer(config, storage.deliveries, {
    now,
    log: app.log,
    metrics: deliveryMetrics(metrics),
    tracer: tracing?.deliveries,
  });
  app.addHook('onReady', async () => deliverer.start());
  app.addHook('onClose', () => deliverer.stop(DRAIN_GRACE_MS));
}

/** As deliverInBackground, on a thread of its own (delivery-thread.ts): started with the node, stopped with it. */
export function deliverOnThread(app: FastifyInstance, config: Config, metrics: ServiceMetrics): void {
  const thread = new DeliveryThread({ variables: config.variables }, deliveryMetrics(metrics), app.log);
  app.addHook('onReady', () => thread.start());
  app.addHook('onClose', () => thread.stop(DRAIN_GRACE_MS));
}

// Expired keys are already ignored; deleting them only keeps the table small. Hourly is plenty.
const PRUNE_INTERVAL_MS = 60 * 60 * 1000;

/** Events older than EVENT_RETENTION_DAYS go, a bounded batch per transaction so no delete holds a lock for long. */
const EVENT_DELETE_BATCH = 1_000;

/** At start, then hourly: a node that starts after a long stop catches up at once. */
export function deleteOldEvents(app: FastifyInstance, storage: Storage, days: number, now: () => Date): void {
  const run = async () => {
    const before = new Date(now().getTime() - days * 86_400_000);
    while ((await storage.events.deleteOlderThan(before, EVENT_DELETE_BATCH)) === EVENT_DELETE_BATCH) {
      // Let requests through between batches.
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  const runLogged = () => {
    run().catch((error: unknown) => app.log.warn({ err: error }, 'deleting old events failed'));
  };
  const timer = setInterval(runLogged, PRUNE_INTERVAL_MS);
  timer.unref();
  app.addHook('onReady', async () => runLogged());
  app.addHook('onClose', async () => clearInterval(timer));
}

export function pruneExpiredIdempotencyKeys(app: FastifyInstance, prune: () => Promise<number>): void {
  const timer = setInterval(() => {
    prune().catch((error: unknown) => app.log.warn({ err: error }, 'pruning idempotency keys failed'));
  }, PRUNE_INTERVAL_MS);
  timer.unref();
  app.addHook('onClose', async () => clearInterval(timer));
}

/**
 * Writes keys' last use every LAST_USE_FLUSH_MS, off the request path, and once more on close (before
 * the storage is closed: server.ts closes the app first), so a clean stop loses none.
 */
export function recordLastUseInBackground(app: FastifyInstance, lastUse: ApiKeyLastUse): void {
  const flush = () =>
    lastUse
      .flush()
      .catch((error: unknown) => app.log.warn({ err: error }, 'recording the last use of keys failed'));
  const timer = setInterval(flush, LAST_USE_FLUSH_MS);
  timer.unref();
  app.addHook('onClose', async () => {
    clearInterval(timer);
    await flush();
  });
}
