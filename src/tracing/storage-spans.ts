import { context, SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import type { Storage } from '../domain/storage.js';
import { wrapMethods } from '../storage/intercept-errors.js';

/**
 * A client span around each storage call made inside a traced request (`pets.create`, `orders.place`,
 * `pets.listJson`…), a child of its server span, with the database semantic conventions' attributes
 * (`db.system.name` sqlite or postgresql, `db.operation.name`). A call covers the statements of its
 * transaction and, for a write, the wait for the group commit it joins (create-batcher.ts), which the
 * span names by how many writes that commit carried only in its duration. Calls outside any request
 * (webhook delivery, background pruning) are not traced.
 */
export class StorageSpans {
  readonly #tracer: Tracer;
  readonly #system: string;

  constructor(tracer: Tracer, system: 'sqlite' | 'postgresql') {
    this.#tracer = tracer;
    this.#system = system;
  }

  instrument(storage: Storage): Storage {
    const spans = <T extends object>(target: T, area: string): T =>
      wrapMethods(target, (call, method) => {
        const name = `${area}.${method}`;
        return (...args) => {
          // Only as part of a request's trace: a background loop would make a root span per poll.
          if (trace.getSpan(context.active()) === undefined) return call(args);
          return this.#tracer.startActiveSpan(
            name,
            {
              kind: SpanKind.CLIENT,
              attributes: { 'db.system.name': this.#system, 'db.operation.name': name },
            },
            (span) => {
              const fail = (error: unknown) => {
                span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
                span.end();
                throw error;
              };
              try {
                const result = call(args);
                if (!(result instanceof Promise)) {
                  span.end();
                  return result;
                }
                return result.then((settled: unknown) => {
                  span.end();
                  return settled;
                }, fail);
              } catch (error) {
                return fail(error);
              }
            },
          );
        };
      });
    return {
      ...storage,
      pets: spans(storage.pets, 'pets'),
      orders: spans(storage.orders, 'orders'),
      apiKeys: spans(storage.apiKeys, 'apiKeys'),
      idempotency: spans(storage.idempotency, 'idempotency'),
      events: spans(storage.events, 'events'),
      webhooks: spans(storage.webhooks, 'webhooks'),
    };
  }
}
