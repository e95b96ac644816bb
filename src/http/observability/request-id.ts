import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyReply } from 'fastify';

// Short and inert: safe to echo in a header and to write in a log line.
const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** The caller's X-Request-Id when it is safe to reuse, a fresh UUID otherwise. */
export function requestIdFor(request: IncomingMessage): string {
  const incoming = request.headers['x-request-id'];
  return typeof incoming === 'string' && SAFE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/** Headers every response carries, errors included. One call each: no object built per request. */
export function setCommonHeaders(reply: FastifyReply): FastifyReply {
  return reply.header('X-Request-Id', reply.request.id).header('X-Content-Type-Options', 'nosniff');
}
