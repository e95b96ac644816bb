import {
  context,
  type Link,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { ClaimedDelivery } from '../domain/webhooks.js';
import type { DeliveryTracer } from '../webhooks/attempt.js';
import type { SendResult } from '../webhooks/sender.js';

/**
 * Each webhook attempt is a client span (`POST`, the HTTP semantic conventions' name for a request
 * with no route template) at the root of a trace of its own, LINKED to the trace of the request that
 * caused the event (the traceparent stored with it): from a receiver's trace an engineer reaches the
 * request that made the change. Its context travels to the receiver in `traceparent`.
 */
export class DeliverySpans implements DeliveryTracer {
  readonly #tracer: Tracer;

  constructor(tracer: Tracer) {
    this.#tracer = tracer;
  }

  async attempt(
    delivery: ClaimedDelivery,
    send: (headers: Record<string, string>) => Promise<SendResult>,
  ): Promise<SendResult> {
    const links: Link[] = [];
    if (delivery.cause) {
      const caused = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, { traceparent: delivery.cause }));
      if (caused) links.push({ context: caused, attributes: { 'petstore.link': 'caused by' } });
    }
    const url = new URL(delivery.url);
    const span = this.#tracer.startSpan(
      'POST',
      {
        kind: SpanKind.CLIENT,
        root: true,
        links,
        attributes: {
          'http.request.method': 'POST',
          // Without query or fragment: an endpoint's URL may carry a token of the receiver's.
          'url.full': `${url.origin}${url.pathname}`,
          'server.address': url.hostname,
          'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
          'petstore.webhook.endpoint_id': String(delivery.endpointId),
          'petstore.event.id': String(delivery.eventId),
          'petstore.event.type': delivery.eventType,
          'petstore.webhook.attempt': delivery.attempts + 1,
        },
      },
      ROOT_CONTEXT,
    );
    const headers: Record<string, string> = {};
    propagation.inject(trace.setSpan(context.active(), span), headers);
    try {
      const result = await send(headers);
      if (result.answered) {
        span.setAttribute('http.response.status_code', result.status);
        if (result.status >= 400)
          span.setStatus({ code: SpanStatusCode.ERROR, message: String(result.status) });
      } else {
        span.setStatus({ code: SpanStatusCode.ERROR, message: result.error });
      }
      return result;
    } finally {
      span.end();
    }
  }
}
