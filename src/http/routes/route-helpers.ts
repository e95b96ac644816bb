import type { FastifyReply, preValidationHookHandler } from 'fastify';
import { type Awaitable, andThen } from '../../domain/awaitable.js';
import { ApiError } from '../request/errors.js';

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * Sends JSON that is already written (a page the database wrote, an event as recorded) as it is: with
 * this Content-Type a string payload skips the response schema's serialiser, whose output it already
 * is, byte for byte (test/storage/storage-contract.ts compares the two for the same rows).
 */
export function sendJson(reply: FastifyReply, json: string): FastifyReply {
  return reply.type(JSON_TYPE).send(json);
}

/**
 * What a handler returns that answers with `send(value)` once `value` is ready: at once for a value a
 * store gave synchronously (SQLite), or later (PostgreSQL). It returns the promise of a reply sent
 * later, which settles once the answer is written, as Fastify's `return reply` does; or nothing for a
 * reply sent at once, which costs no promise. A handler must not return a reply sent at once: Fastify
 * would wait on it as on a promise, and a handler whose promise settles before the answer is written
 * (compression writes it later) is sent again, empty.
 */
export function sendWhenReady<T>(
  value: Awaitable<T>,
  send: (value: T) => FastifyReply,
): Promise<FastifyReply> | undefined {
  const sending = andThen(value, send);
  return sending instanceof Promise ? sending : undefined;
}

/**
 * A query parameter that may be repeated (`?type=a&type=b`, `?id=3&id=17`) is a string to the query
 * parser when given once and an array when repeated: always an array to the schema.
 */
export const repeatable =
  (...names: string[]): preValidationHookHandler =>
  (request, _reply, done) => {
    const query = request.query as Record<string, unknown>;
    for (const name of names) if (typeof query[name] === 'string') query[name] = [query[name]];
    done();
  };

/** For operations that take no body (deliver, cancel, enable, rotate, retry): one sent is refused, not ignored. */
export const noBody: preValidationHookHandler = (request, _reply, done) =>
  done(
    request.body === undefined
      ? undefined
      : new ApiError('invalid_request', 'this operation takes no request body'),
  );

/**
 * What every route file of the API comes after: authentication, scopes and rate limits run first, the
 * 404/405 fallbacks and the OpenAPI document see its routes, and bodies are parsed and decoded.
 */
export const API_ROUTES_AFTER = [
  'authentication',
  'scopes',
  'rate-limit',
  'route-fallbacks',
  'openapi',
  'json-body',
  'content-codings',
];
