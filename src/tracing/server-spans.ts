import {
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's server span, while tracing is on. */
    span?: Span;
    /** Its trace id, for the request's log line, while tracing is on. */
    traceId?: string;
  }
}

/** `/v1/pets/:petId` as OpenAPI writes it: `/v1/pets/{petId}`. */
const routeTemplate = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

/** Route templates, converted once each. */
const templates = new Map<string, string>();

function templateOf(request: FastifyRequest): string | undefined {
  const url = request.routeOptions.url;
  if (url === undefined) return undefined;
  let template = templates.get(url);
  if (template === undefined) {
    template = routeTemplate(url);
    templates.set(url, template);
  }
  return template;
}

/**
 * A server span for every request, named by method and route template (`GET /v1/pets/{petId}`, the
 * method alone for an unknown address) with the HTTP semantic conventions' attributes, the operation's
 * id and, once known, the API key's id (never the key). An incoming W3C `traceparent`/`tracestate`
 * continues the caller's trace. Every answer carries `traceresponse` (W3C Trace Context Level 2:
 * `00-<trace id>-<span id>-<flags>`), errors included. The rest of the request runs in the span's
 * context, so the spans of its database work are its children. Registered only when tracing is on.
 */
export const serverSpans = fp(
  async (app: FastifyInstance, { tracer }: { tracer: Tracer }) => {
    app.addHook('onRequest', (request, reply, done) => {
      const parent = propagation.extract(ROOT_CONTEXT, request.headers);
      const template = templateOf(request);
      const method = request.method;
      // What a sampler may look at is given at the start; the rest only to a span that is recorded.
      const span = tracer.startSpan(
        template === undefined ? method : `${method} ${template}`,
        {
          kind: SpanKind.SERVER,
          attributes: {
            'http.request.method': method,
            'url.path': request.url.split('?')[0],
            ...(template === undefined ? {} : { 'http.route': template }),
          },
        },
        parent,
      );
      const recording = span.isRecording();
      if (recording) {
        span.setAttributes({
          'url.scheme': request.protocol,
          'client.address': request.ip,
          'network.protocol.version': request.raw.httpVersion,
          ...(request.headers['user-agent'] ? { 'user_agent.original': request.headers['user-agent'] } : {}),
        });
      }
      const { traceId, spanId, traceFlags } = span.spanContext();
      request.span = span;
      request.traceId = traceId;
      reply.header('traceresponse', `00-${traceId}-${spanId}-0${traceFlags & 1}`);
      // The rest of a recorded request, its handler and its storage calls, runs in the span's context.
      // A request the sampler left out enters none: nothing below reads a span that is not recording
      // (storage spans, a change's cause), and entering a context costs every asynchronous step of the
      // request a store to carry.
      if (recording) context.with(trace.setSpan(parent, span), done);
      else done();
    });
    app.addHook('onResponse', (request, reply, done) => {
      const span = request.span;
      if (span?.isRecording()) {
        const status = reply.statusCode;
        const operationId = (request.routeOptions.schema as { operationId?: string } | undefined)
          ?.operationId;
        span.setAttribute('http.response.status_code', status);
        if (operationId) span.setAttribute('petstore.operation_id', operationId);
        if (request.apiKeyId) span.setAttribute('petstore.api_key.id', request.apiKeyId);
        // Semantic conventions: a server span is an error for a 5xx only.
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: String(status) });
        span.end();
      } else span?.end();
      done();
    });
  },
  { name: 'server-spans', fastify: '5.x' },
);
