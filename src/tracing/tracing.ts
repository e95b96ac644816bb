import { context, propagation, type Tracer, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  NodeTracerProvider,
  ParentBasedSampler,
  type Sampler,
  SamplingDecision,
  type SamplingResult,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-node';
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
 * The longest an attribute value is exported, in characters, unless OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT
 * or OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT says otherwise (the SDK's own default is no bound): a request's
 * User-Agent and path are the client's to choose, up to the 16 KiB of a request head, and every span
 * would carry them whole to the collector.
 */
export const DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT = 2048;

/**
 * The bound on attribute values: the first of the two variables that is a positive whole number, else the
 * default (the SDK would take 0 or less as no bound at all).
 */
export function attributeValueLengthLimit(env: NodeJS.ProcessEnv = process.env): number {
  for (const name of ['OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT', 'OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT']) {
    const value = env[name]?.trim();
    if (value && /^[1-9]\d*$/.test(value)) return Number(value);
  }
  return DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT;
}

/**
 * Samples a ratio of the spans it is asked about, drawing at random: for requests that carry a
 * caller's trace, whose trace id the caller chose (a trace-id ratio would let a caller pick an id that
 * is always kept).
 */
class RandomRatioSampler implements Sampler {
  readonly #ratio: number;
  readonly #random: () => number;

  constructor(ratio: number, random: () => number) {
    this.#ratio = ratio;
    this.#random = random;
  }

  shouldSample(): SamplingResult {
    return {
      decision:
        this.#random() < this.#ratio ? SamplingDecision.RECORD_AND_SAMPLED : SamplingDecision.NOT_RECORD,
    };
  }

  toString(): string {
    return `RandomRatioSampler{${this.#ratio}}`;
  }
}

/**
 * The sampler OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG name (`always_on`, `always_off`,
 * `traceidratio`, and their `parentbased_` forms; `parentbased_always_on` when unset or unknown), with
 * one difference from the SDK's: a caller's sampled flag decides nothing. An incoming `traceparent` is
 * continued (its trace id, the caller's span as parent), but whether the request is sampled is the
 * service's own decision, at its own ratio, drawn at random: otherwise any client, key or no key, could
 * make the node export every request it sends (flags `01`), or hide its requests from traces (`00`).
 * Within the service a span follows its parent's decision, so a request's spans are kept or dropped
 * together (for `traceidratio` this is the decision its trace id would give them anyway).
 */
export function samplerFrom(
  env: NodeJS.ProcessEnv = process.env,
  random: () => number = Math.random,
): Sampler {
  const name = env.OTEL_TRACES_SAMPLER?.trim().toLowerCase();
  const given = Number(env.OTEL_TRACES_SAMPLER_ARG?.trim() || Number.NaN);
  // The SDK's rule: a ratio missing or outside [0, 1] is 1.
  const ratio = given >= 0 && given <= 1 ? given : 1;
  let root: Sampler;
  let remote: Sampler;
  if (name === 'always_off' || name === 'parentbased_always_off') {
    root = new AlwaysOffSampler();
    remote = root;
  } else if (name === 'traceidratio' || name === 'parentbased_traceidratio') {
    root = new TraceIdRatioBasedSampler(ratio);
    remote = new RandomRatioSampler(ratio, random);
  } else {
    root = new AlwaysOnSampler();
    remote = root;
  }
  return new ParentBasedSampler({ root, remoteParentSampled: remote, remoteParentNotSampled: remote });
}

/**
 * Starts the OpenTelemetry SDK, configured only by the standard OTEL_* variables: where to export
 * (OTLP over HTTP, JSON bodies), the sampler (samplerFrom: OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG;
 * parent-based always-on by default, a caller's sampled flag not trusted), the bound on attribute values
 * (attributeValueLengthLimit), the batch processor (OTEL_BSP_*), the resource (OTEL_SERVICE_NAME,
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
    sampler: samplerFrom(),
    spanLimits: { attributeValueLengthLimit: attributeValueLengthLimit() },
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  provider.register();
  // This provider's own tracer, not the global one: the global registration is kept by the first
  // provider of a process, and a process that starts tracing again (tests) must use its new one.
  const tracer = provider.getTracer('animal-store', VERSION);
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
