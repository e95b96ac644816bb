import underPressure from '@fastify/under-pressure';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../config/config.js';
import { ApiError, RETRY_AFTER_SECONDS } from './errors.js';
import { documentOnEveryRoute, errorResponse, RetryAfterHeader } from './schemas/responses.js';

/** Under-pressure throws this; as an ApiError it leaves through the one error path with our body. */
class OverloadedError extends ApiError {
  constructor() {
    super('unavailable', 'the service is overloaded; retry after a few seconds', {
      'Retry-After': String(RETRY_AFTER_SECONDS),
    });
  }
}

/**
 * Sheds load in the context it is registered in (/v1): while the event loop lags or the heap runs
 * high, each request is answered 503 at once, before authentication touches the database, instead
 * of joining a queue whose latency only grows. Probes and metrics stay outside, so an overloaded
 * node is still seen alive and can be watched. Under-pressure samples once a second.
 */
export const shedLoad = fp(
  async (app: FastifyInstance, { overload }: Pick<Config, 'overload'>) => {
    documentOnEveryRoute(app, { 503: unavailableAnswer });
    await app.register(underPressure, {
      maxEventLoopDelay: overload.maxEventLoopDelayMs,
      maxHeapUsedBytes: overload.maxHeapUsedBytes,
      retryAfter: RETRY_AFTER_SECONDS,
      customError: OverloadedError,
    });
  },
  { name: 'shed-load', fastify: '5.x', dependencies: ['error-handling'] },
);

/**
 * How every /v1 operation documents its 503: from this hook, and from any storage call that finds the
 * database unavailable (errors.ts), which this describes too.
 */
const unavailableAnswer = errorResponse(
  'The service cannot serve now: the database is unavailable (down, not answering within its bound, full or ' +
    'read-only) or the node is overloaded (event loop lagging or memory high). Nothing was stored; retry after ' +
    '`Retry-After` seconds',
  { unavailable: 'the database is unavailable; retry after a few seconds' },
  { 'Retry-After': RetryAfterHeader },
);
