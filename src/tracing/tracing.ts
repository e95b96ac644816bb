import { context, propagation, type Tracer, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { readEventCauseFrom } from '../domain/event-cause.js';
import { VERSION } from '../version.js';
import { DeliverySpans } from './delivery-spans.js';
import { serverSpans } from './server-spans.js';
import { StorageSpans } from './storage-spans.js';

/** The service's name in traces unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names it. */
const SERVICE_NAME = 'animal-store';

/**
 * The longest a stop waits for the last spans to be exported: a collector that is away (the exporter
 * retries until OTEL_EXPORTER_OTLP_TIMEOUT, 10 s by default) must neither hold up a shutdown nor fail it.
 */
export const SHUTDOWN_EXPORT_MS = 2_000;

/** What the rest of the service uses of tracing, once it is on (tracing-wanted.ts). */
export interface Tracing {
  /** The Fastify plugin that makes a server span of each request (server-spans.ts). */
  serverSpans: typeof serverSpans;
  tracer: Tracer;
  storage: StorageSpans;
  deliveries: DeliverySpans;
  /**
   * Exports what is left and stops (on close, so a clean stop loses no span); rejects when that failed
   * or took longer than SHUTDOWN_EXPORT_MS, the spans then lost.
   */
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry SDK, configured only by the standard OTEL_* variables: where to export
 * (OTLP over HTTP, JSON bodies), the sampler (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG; parent-based
 * always-on by default), the batch processor (OTEL_BSP_*), the resource (OTEL_SERVICE_NAME,
 * OTEL_RESOURCE_ATTRIBUTES). W3C trace context (traceparent, tracestate) and baggage are propagated.
 * Loaded only when tracing is wanted: this module is imported dynamically.
 */
export function startTracing(database: 'sqlite' | 'postgresql'): Tracing {
  // The variables' attributes take precedence over these defaults.
  const resource = resourceFromAttributes({ 'service.name': SERVICE_NAME, 'service.version': VERSION }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  provider.register();
  const tracer = trace.getTracer('animal-store', VERSION);
  // Every change records the traceparent of the request that made it, for its deliveries' links; not
  // when the sampler left the request out (a link to a trace nobody kept leads nowhere).
  readEventCauseFrom(() => {
    const active = context.active();
    if (!trace.getSpan(active)?.isRecording()) return undefined;
    const carrier: Record<string, string> = {};
    propagation.inject(active, carrier);
    return carrier.traceparent;
  });
  return {
    serverSpans,
    tracer,
    storage: new StorageSpans(tracer, database),
    deliveries: new DeliverySpans(tracer),
    shutdown: async () => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`the last spans were not exported within ${SHUTDOWN_EXPORT_MS} ms`)),
          SHUTDOWN_EXPORT_MS,
        ).unref();
      });
      try {
        await Promise.race([provider.shutdown(), late]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
