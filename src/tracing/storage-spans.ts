import {
  context,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { type GroupCommitObserver, observeGroupCommits } from '../storage/create-batcher.js';

/** Ends `span` when `result` settles (an error marks it), and hands `result` on as it was. */
function endWhenSettled<R>(span: Span, run: () => R): R {
  const fail = (error: unknown): never => {
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
    span.end();
    throw error;
  };
  try {
    const result = run();
    if (!(result instanceof Promise)) {
      span.end();
      return result;
    }
    return result.then((settled: unknown) => {
      span.end();
      return settled;
    }, fail) as R;
  } catch (error) {
    return fail(error);
  }
}

/**
 * A client span around each storage call made inside a traced request (`pets.create`, `orders.place`,
 * `pets.listJson`…), a child of its server span, with the database semantic conventions' attributes
 * (`db.system.name` sqlite or postgresql, `db.operation.name`). A write waits for the group commit it
 * joins (create-batcher.ts): each commit is a span of its own, `group commit pets.create`, naming how
 * many writes it carried (`db.operation.batch.size`), a child of the first write's span and linked to
 * the others'. Calls outside any request (background pruning, the deliverer's polling) are not traced.
 */
export class StorageSpans implements GroupCommitObserver {
  readonly #tracer: Tracer;
  readonly #system: string;

  constructor(tracer: Tracer, system: 'sqlite' | 'postgresql') {
    this.#tracer = tracer;
    this.#system = system;
    observeGroupCommits(this);
  }

  caller(): SpanContext | undefined {
    const span = trace.getSpan(context.active());
    return span?.isRecording() ? span.spanContext() : undefined;
  }

  commit<R>(name: string, callers: readonly unknown[], run: () => R): R {
    const [first, ...others] = callers.filter((caller): caller is SpanContext => caller !== undefined);
    // Writes from no traced request (a delivery's result) make no span.
    if (first === undefined) return run();
    const span = this.#tracer.startSpan(
      `group commit ${name}`,
      {
        kind: SpanKind.CLIENT,
        links: others.map((caller) => ({ context: caller })),
        attributes: {
          'db.system.name': this.#system,
          'db.operation.name': 'group commit',
          'db.operation.batch.size': callers.length,
        },
      },
      trace.setSpanContext(ROOT_CONTEXT, first),
    );
    return context.with(trace.setSpan(ROOT_CONTEXT, span), () => endWhenSettled(span, run));
  }

  /**
   * Runs one storage call (`operation`: `pets.create`…) in a client span, when it is made inside a
   * traced request: the storage boundary (boundary.ts) calls it around each call.
   */
  around<R>(operation: string, run: () => R): R {
    // Only as part of a request's trace that is kept: a background loop would make a root span per
    // poll, and a request the sampler left out would pay for spans nobody sees.
    if (!trace.getSpan(context.active())?.isRecording()) return run();
    return this.#tracer.startActiveSpan(
      operation,
      {
        kind: SpanKind.CLIENT,
        attributes: { 'db.system.name': this.#system, 'db.operation.name': operation },
      },
      (span) => endWhenSettled(span, run),
    );
  }
}
