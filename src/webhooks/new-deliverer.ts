import type { Config } from '../config/config.js';
import type { DeliveryQueue } from '../domain/webhooks.js';
import type { DelivererLog, DelivererMetrics, DeliveryTracer } from './attempt.js';
import { Deliverer } from './deliverer.js';
import { WebhookSender } from './sender.js';

/** The deliverer of a process, or of its delivery thread, as the configuration sets it. */
export function newDeliverer(
  config: Config,
  store: DeliveryQueue,
  {
    now,
    log,
    metrics,
    tracer,
  }: { now: () => Date; log: DelivererLog; metrics: DelivererMetrics; tracer: DeliveryTracer | undefined },
): Deliverer {
  const { timeoutMs, retrySchedule, disableAfterMs, concurrencyPerEndpoint, policy } = config.webhooks;
  return new Deliverer({
    store,
    sender: new WebhookSender(policy, { timeoutMs, connectionsPerEndpoint: concurrencyPerEndpoint }),
    schedule: retrySchedule,
    timeoutMs,
    disableAfterMs,
    concurrencyPerEndpoint,
    now,
    log,
    tracer,
    metrics,
  });
}
