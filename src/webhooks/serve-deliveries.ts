// What the delivery thread of a `serve --role all` process does (delivery-thread-main.ts is its entry;
// delivery-thread.ts starts it): its own database connection and deliverer, on the thread's own event
// loop, so requests that saturate the API's loop cannot starve deliveries, and deliveries take no share
// of it. What it counts reaches the process's /metrics as messages, a batch every METRICS_FLUSH_MS.
// Apart from the entry so that it runs in process too, on a MessageChannel's port, for its tests.
import { loadConfig } from '../config/config.js';
import { createLogger } from '../logging.js';
import { databaseKind, openStorage } from '../storage/open-storage.js';
import { tracingWanted } from '../tracing/wanted.js';
import type { DelivererMetrics } from './attempt.js';
import type {
  DeliveryThreadData,
  FromDeliveryThread,
  MetricsBatch,
  ToDeliveryThread,
} from './delivery-thread.js';
import { newDeliverer } from './new-deliverer.js';

const METRICS_FLUSH_MS = 250;

/** The thread's side of its channel to the node: `parentPort` on the thread. */
export interface ThreadPort {
  postMessage(message: FromDeliveryThread): void;
  on(event: 'message', listener: (message: ToDeliveryThread) => void): unknown;
  close(): void;
}

/**
 * Opens the database and starts delivering, then says `started`; rejects if it cannot (the node's start
 * is refused with that error). On `stop`, stops the deliverer with the grace given, sends what is left
 * counted, closes the database and the port.
 */
export async function serveDeliveries(port: ThreadPort, { variables }: DeliveryThreadData): Promise<void> {
  const config = loadConfig(variables);
  const tracing = tracingWanted()
    ? (await import('../tracing/tracing.js')).startTracing(databaseKind(config.databaseUrl))
    : undefined;
  const storage = await openStorage(config);
  const log = await createLogger(config);

  let counted: MetricsBatch = { attempted: [], disabled: [], delivered: [] };
  const flush = () => {
    if (counted.attempted.length + counted.disabled.length + counted.delivered.length === 0) return;
    port.postMessage({ type: 'metrics', batch: counted });
    counted = { attempted: [], disabled: [], delivered: [] };
  };
  const metrics: DelivererMetrics = {
    attempted: (outcome, seconds) => counted.attempted.push([outcome, seconds]),
    disabled: (reason) => counted.disabled.push(reason),
    delivered: (lagSeconds) => counted.delivered.push(lagSeconds),
  };
  const timer = setInterval(flush, METRICS_FLUSH_MS);
  const deliverer = newDeliverer(config, storage.deliveries, {
    now: () => new Date(),
    log,
    metrics,
    tracer: tracing?.deliveries,
  });
  deliverer.start();
  port.postMessage({ type: 'started' });

  port.on('message', (message) => {
    if (message.type !== 'stop') return;
    void (async () => {
      await deliverer.stop(message.graceMs);
      clearInterval(timer);
      flush();
      await storage.close();
      await tracing
        ?.shutdown()
        .catch((error: unknown) => log.warn({ err: error }, 'traces: the last spans were not exported'));
      port.close();
    })();
  });
}
