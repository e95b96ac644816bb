import underPressure from '@fastify/under-pressure';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/config.js';
import { ApiError, RETRY_AFTER_SECONDS } from './errors.js';

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
export async function shedLoad(app: FastifyInstance, { overload }: Pick<Config, 'overload'>): Promise<void> {
  await app.register(underPressure, {
    maxEventLoopDelay: overload.maxEventLoopDelayMs,
    maxHeapUsedBytes: overload.maxHeapUsedBytes,
    retryAfter: RETRY_AFTER_SECONDS,
    customError: OverloadedError,
  });
}
