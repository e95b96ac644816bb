import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';

/**
 * One log line per request, written when the response is done: method, URL, status and time. Headers
 * are never logged (so no Authorization value can leak), nor is the incoming-request line.
 */
export class RequestLog extends LogController {
  readonly #logSuccesses: boolean;

  /**
   * `logSuccesses` false (LOG_REQUESTS=false) keeps only the lines of requests that errored: writing a
   * line per request took 17% of the CPU of a `get` and 25% of a `create` (docs/benchmarks.md).
   */
  constructor(logSuccesses = true) {
    // Every line a request logs carries its id, the one echoed in X-Request-Id.
    super({ requestIdLogLabel: 'requestId' });
    this.#logSuccesses = logSuccesses;
  }

  override incomingRequest(): void {}

  override requestCompleted(error: Error | null, request: FastifyRequest, reply: FastifyReply): void {
    if (!error && !this.#logSuccesses) return;
    const line = {
      method: request.method,
      url: request.url,
      statusCode: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 100) / 100,
    };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else reply.log.info(line, 'request');
  }
}
