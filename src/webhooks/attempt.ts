import { attemptOutcome } from '../domain/attempt-outcome.js';
import type { ClaimedDelivery, DeliveryQueue } from '../domain/webhooks.js';
import type { SendResult, WebhookSender } from './sender.js';
import { webhookHeaders } from './signature.js';

export interface DelivererLog {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
}

export interface DelivererMetrics {
  attempted(outcome: 'succeeded' | 'retrying' | 'failed', seconds: number): void;
  disabled(reason: string): void;
  /** A 2xx arrived this long after its event occurred. */
  delivered(lagSeconds: number): void;
}

/** Runs one attempt inside a trace span; `send` gets the headers that carry it (traceparent). */
export interface DeliveryTracer {
  attempt(
    delivery: ClaimedDelivery,
    send: (headers: Record<string, string>) => Promise<SendResult>,
  ): Promise<SendResult>;
}

/** What an attempt is made with: the same for every attempt of a process. */
export interface AttemptParts {
  store: DeliveryQueue;
  sender: WebhookSender;
  /** Delays between attempts (WEBHOOK_RETRY_SCHEDULE), in milliseconds. */
  schedule: readonly number[];
  disableAfterMs: number;
  now: () => Date;
  log: DelivererLog;
  metrics?: DelivererMetrics | undefined;
  /** When tracing is on: each attempt is a span (tracing/delivery-spans.ts). */
  tracer?: DeliveryTracer | undefined;
  random: () => number;
}

/**
 * One attempt of a leased delivery: signed, sent, its outcome written (with others', by the store) and
 * told to the metrics and the log. `answered` is called as the answer (or its absence) is in, with how
 * long it took, before the outcome is written. Resolves to whether the outcome scheduled a retry.
 */
export async function attemptDelivery(
  parts: AttemptParts,
  delivery: ClaimedDelivery,
  answered: (ms: number) => void,
): Promise<boolean> {
  const { store, sender, schedule, now, log, metrics, tracer } = parts;
  const id = String(delivery.eventId);
  const startedAt = now();
  const started = performance.now();
  const headers = webhookHeaders(delivery.secrets, id, Math.floor(startedAt.getTime() / 1000), delivery.body);
  const result = await (tracer
    ? tracer.attempt(delivery, (trace) =>
        sender.send(delivery.endpointId, delivery.url, { ...headers, ...trace }, delivery.body),
      )
    : sender.send(delivery.endpointId, delivery.url, headers, delivery.body));
  const seconds = (performance.now() - started) / 1000;
  answered(seconds * 1000);
  const at = now();
  const outcome = attemptOutcome(delivery, result, { startedAt, at, seconds }, schedule, parts.random);
  const logged = { endpointId: String(delivery.endpointId), eventId: id };
  let recorded: Awaited<ReturnType<DeliveryQueue['recordAttempt']>>;
  try {
    recorded = await store.recordAttempt(delivery, outcome, new Date(at.getTime() - parts.disableAfterMs));
  } catch (error) {
    // The lease runs out and the delivery is attempted again: at least once, never lost.
    log.warn({ err: error, ...logged }, 'recording a webhook attempt failed');
    return false;
  }
  if (!recorded.recorded) return false;
  const { succeeded } = outcome;
  metrics?.attempted(succeeded ? 'succeeded' : recorded.failed ? 'failed' : 'retrying', seconds);
  if (succeeded) metrics?.delivered((at.getTime() - delivery.occurredAt.getTime()) / 1000);
  if (recorded.failed)
    log.warn(
      { ...logged, attempts: delivery.attempts + 1, lastError: outcome.error },
      'webhook delivery failed: no attempt left',
    );
  if (recorded.disabled) {
    metrics?.disabled(recorded.disabled);
    log.warn(
      { endpointId: logged.endpointId, reason: recorded.disabled, lastError: outcome.error },
      'webhook endpoint disabled',
    );
  }
  return !succeeded && !recorded.failed && !recorded.disabled;
}
