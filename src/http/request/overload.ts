import { monitorEventLoopDelay } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../../config/config.js';
import { documentOnEveryRoute, errorResponse, RetryAfterHeader } from '../schemas/responses.js';
import { ApiError, RETRY_AFTER_SECONDS } from './errors.js';

/** The load shedder's refusal; as an ApiError it leaves through the one error path with our body. */
class OverloadedError extends ApiError {
  constructor() {
    super('unavailable', 'the service is overloaded; retry after a few seconds', {
      'Retry-After': String(RETRY_AFTER_SECONDS),
    });
  }
}

const SAMPLE_EVERY_MS = 1_000;
/** The delay histogram's resolution, subtracted from its mean as the timer's own lateness. */
const RESOLUTION_MS = 10;

/**
 * The event loop's mean delay and the heap in use, sampled once a second off the request path. What
 * @fastify/under-pressure measured, but without process.memoryUsage(): that reads /proc/self/stat,
 * needs a file descriptor, and threw EMFILE from the timer, uncaught, when connections had taken every
 * descriptor, ending the process. V8's heap statistics need none.
 */
class Pressure {
  delayMs = 0;
  heapUsedBytes = 0;
  readonly #histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  readonly #timer: NodeJS.Timeout;

  constructor() {
    this.#histogram.enable();
    this.#timer = setInterval(() => this.#sample(), SAMPLE_EVERY_MS);
    this.#timer.unref();
  }

  #sample(): void {
    const mean = this.#histogram.mean / 1e6 - RESOLUTION_MS;
    // No sample at all in a second means the loop was blocked the whole time.
    this.delayMs = Number.isNaN(mean) ? Number.POSITIVE_INFINITY : Math.max(0, mean);
    this.#histogram.reset();
    this.heapUsedBytes = getHeapStatistics().used_heap_size;
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#histogram.disable();
  }
}

/**
 * Sheds load in the context it is registered in (/v1): while the event loop lags or the heap runs
 * high, each request is answered 503 at once, before authentication touches the database, instead
 * of joining a queue whose latency only grows. Probes and metrics stay outside, so an overloaded
 * node is still seen alive and can be watched. 0 turns a threshold off.
 */
export const shedLoad = fp(
  async (app: FastifyInstance, { overload }: Pick<Config, 'overload'>) => {
    documentOnEveryRoute(app, { 503: unavailableAnswer });
    const { maxEventLoopDelayMs, maxHeapUsedBytes } = overload;
    if (maxEventLoopDelayMs <= 0 && maxHeapUsedBytes <= 0) return;
    const pressure = new Pressure();
    app.addHook('onClose', async () => pressure.stop());
    app.addHook('onRequest', (_request, _reply, done) => {
      const overloaded =
        (maxEventLoopDelayMs > 0 && pressure.delayMs > maxEventLoopDelayMs) ||
        (maxHeapUsedBytes > 0 && pressure.heapUsedBytes > maxHeapUsedBytes);
      done(overloaded ? new OverloadedError() : undefined);
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
