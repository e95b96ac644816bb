import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { setCommonHeaders } from '../observability/request-id.js';
import { ApiError } from './errors.js';
import { unmetExpectation } from './expect.js';

/**
 * Node keeps only the first of repeated Authorization and Content-Type headers, so a request with two
 * would be judged by whichever came first. Such a request is ambiguous: it is refused instead.
 */
export function isRepeated(rawHeaders: readonly string[], name: string): boolean {
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (
      (rawHeaders[i] as string).length === name.length &&
      (rawHeaders[i] as string).toLowerCase() === name
    ) {
      seen++;
      if (seen > 1) return true;
    }
  }
  return false;
}

/** Why a request head is refused before anything else looks at it (authentication included), if it is. */
export function requestHeadError(raw: IncomingMessage): ApiError | undefined {
  // HTTP/1.1 requires exactly one Host (RFC 9112 §3.2): Node's own refusal of a missing one would be an
  // empty 400, and of two it keeps the first. HTTP/1.0 does not require one (HAProxy's default health
  // check sends none).
  if (raw.headers.host === undefined && raw.httpVersion !== '1.0')
    return new ApiError('invalid_request', 'a Host header is required');
  if (isRepeated(raw.rawHeaders, 'host'))
    return new ApiError('invalid_request', 'send exactly one Host header');
  return unmetExpectation(raw.headers.expect);
}

/** Every response's common headers, and a request head refused before anything else looks at it. */
export const requestHead = fp(
  async (app: FastifyInstance) => {
    // Hooks on the request path take a callback rather than being async: no promise per request per hook.
    app.addHook('onRequest', (request, reply, done) => {
      setCommonHeaders(reply);
      done(requestHeadError(request.raw));
    });
  },
  { name: 'request-head', fastify: '5.x', dependencies: ['error-handling'] },
);
