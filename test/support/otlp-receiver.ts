import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { poll } from './cli.js';

/** One span as the receiver decoded it from OTLP/HTTP JSON: ids in hex, attributes as plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  links: { traceId: string; spanId: string; attributes: Record<string, string | number | boolean> }[];
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: number;
  /** The status's description ('' when it has none). */
  statusMessage: string;
  service: string;
  /** Every attribute of the resource that exported it (service.name, service.version, …). */
  resource: Record<string, string | number | boolean>;
  /** The tracer (instrumentation scope) that made it. */
  scope: { name: string; version: string | undefined };
}

interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number };
}

const plainValue = ({ value }: OtlpAttribute): string | number | boolean =>
  value.stringValue ?? value.boolValue ?? value.doubleValue ?? Number(value.intValue);

const attributesOf = (list: OtlpAttribute[] = []) =>
  Object.fromEntries(list.map((attribute) => [attribute.key, plainValue(attribute)]));

/**
 * A real OTLP/HTTP receiver (what a collector listens with on 4318), for the tracing tests: it takes
 * the JSON bodies the exporter POSTs to /v1/traces, answers 200, and keeps every span, decoded.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Every request it got, by path and content type. */
  readonly requests: string[] = [];
  readonly #server: Server;
  /** The answers withheld while the receiver stalls (hold), or undefined while it answers at once. */
  #held: (() => void)[] | undefined;

  private constructor() {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        this.requests.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
        const body = JSON.parse(Buffer.concat(chunks).toString() || '{}');
        for (const resourceSpans of body.resourceSpans ?? []) {
          const resource = attributesOf(resourceSpans.resource?.attributes);
          const service = String(resource['service.name']);
          for (const scope of resourceSpans.scopeSpans ?? [])
            for (const span of scope.spans ?? [])
              this.spans.push({
                traceId: span.traceId,
                spanId: span.spanId,
                parentSpanId: span.parentSpanId || undefined,
                name: span.name,
                kind: span.kind,
                attributes: attributesOf(span.attributes),
                links: (span.links ?? []).map(
                  (link: { traceId: string; spanId: string; attributes?: OtlpAttribute[] }) => ({
                    traceId: link.traceId,
                    spanId: link.spanId,
                    attributes: attributesOf(link.attributes),
                  }),
                ),
                status: span.status?.code ?? 0,
                statusMessage: span.status?.message ?? '',
                service,
                resource,
                scope: { name: scope.scope?.name, version: scope.scope?.version },
              });
        }
        const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        if (this.#held) this.#held.push(answer);
        else answer();
      });
    });
  }

  static async start(): Promise<OtlpReceiver> {
    const receiver = new OtlpReceiver();
    await new Promise<void>((resolve) => receiver.#server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  /** OTEL_EXPORTER_OTLP_ENDPOINT for it. */
  get endpoint(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** Waits (never a timing assertion) until `check` finds what it needs among the spans received. */
  waitFor<T>(what: string, check: (spans: ReceivedSpan[]) => T | undefined): Promise<T> {
    return poll(what, () => check(this.spans));
  }

  /** Stalls like a collector that is away: exports are taken but not answered until the returned release. */
  hold(): () => void {
    this.#held ??= [];
    return () => {
      const held = this.#held ?? [];
      this.#held = undefined;
      for (const answer of held) answer();
    };
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}
