import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/**
 * CORS, off unless CORS_ORIGINS names the browser origins allowed to call the API. Preflights are
 * answered without a key (browsers never send credentials on them); the headers a client needs to read
 * (paging, Location, deprecation, request id, rate limits) are exposed.
 */
export const corsPolicy = fp(
  async (app: FastifyInstance, { origins }: { origins: readonly string[] }) => {
    if (origins.length === 0) return;
    await app.register(cors, {
      origin: [...origins],
      methods: ['GET', 'HEAD', 'POST'],
      // traceparent and tracestate: a page's own tracing continues into the service's traces.
      allowedHeaders: [
        'Authorization',
        'Content-Type',
        'X-Request-Id',
        'Idempotency-Key',
        'traceparent',
        'tracestate',
      ],
      exposedHeaders: [
        'Link',
        'Location',
        'Deprecation',
        'Sunset',
        'X-Request-Id',
        'traceresponse',
        'WWW-Authenticate',
        'Retry-After',
        'RateLimit',
        'RateLimit-Policy',
        'Idempotent-Replayed',
      ],
      maxAge: 600,
    });
  },
  { name: 'cors', fastify: '5.x' },
);
