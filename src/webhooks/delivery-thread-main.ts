// The delivery tier of a `serve --role all` process, on a thread of its own (delivery-thread.ts starts it):
// its own event loop and its own database connection, so requests that saturate the API's loop cannot
// starve deliveries, and deliveries take no share of it. What it counts reaches the process's /metrics
// as messages, a batch every METRICS_FLUSH_MS.
import { parentPort, workerData } from 'node:worker_threads';
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

const port = parentPort;
if (!port) throw new Error('delivery-thread-main.ts runs as a worker thread (delivery-thread.ts)');
const { variables } = workerData as DeliveryThreadData;
const config = loadConfig(variables);
const tracing = tracingWanted()
  ? (await import('../tracing/tracing.js')).startTracing(databaseKind(config.databaseUrl))
  : undefined;
const storage = await openStorage(config);
const log = await createLogger(config);
const send = (message: FromDeliveryThread) => port.postMessage(message);

let counted: MetricsBatch = { attempted: [], disabled: [], delivered: [] };
const flush = () => {
  if (counted.attempted.length + counted.disabled.length + counted.delivered.length === 0) return;
  send({ type: 'metrics', batch: counted });
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
send({ type: 'started' });

port.on('message', (message: ToDeliveryThread) => {
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
