import { type FastifyBaseLogger, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import { ERROR_CODE_BY_STATUS } from '../schemas/error.js';
import { RequestLogger } from './request-logger.js';

const REDACTED = '[redacted]';
/**
 * A parameter name this short is logged even when the operation does not define it (`stauts=…` shows
 * the typo): no API key is shorter than 16 characters, so a key sent as a bare name is still redacted.
 */
const LOGGED_NAME_MAX = 15;
const NO_PARAMETERS: ReadonlySet<string> = new Set();
const parametersBySchema = new WeakMap<object, ReadonlySet<string>>();

/** The query parameters the request's operation defines (limit, status and cursor for listPets). */
function definedParameters(request: FastifyRequest): ReadonlySet<string> {
  const schema = request.routeOptions.schema?.querystring as { properties?: object } | undefined;
  if (!schema?.properties) return NO_PARAMETERS;
  let names = parametersBySchema.get(schema);
  if (!names) {
    names = new Set(Object.keys(schema.properties));
    parametersBySchema.set(schema, names);
  }
  return names;
}

function decodedName(name: string): string {
  // Most names have nothing to decode: no exception handler, no copies.
  if (!name.includes('%') && !name.includes('+')) return name;
  try {
    return decodeURIComponent(name.replaceAll('+', ' '));
  } catch {
    return name;
  }
}

/**
 * The URL as it may be logged: the path, and of the query the values of the parameters the operation
 * defines. Any other value is redacted: a client that puts its key in the URL (`?api_key=…`) is
 * refused, and its key must not reach the log either.
 */
export function loggableUrl(url: string, defined: ReadonlySet<string>): string {
  const queryAt = url.indexOf('?');
  if (queryAt < 0) return url;
  const parameters = url
    .slice(queryAt + 1)
    .split('&')
    .map((parameter) => {
      const equals = parameter.indexOf('=');
      const name = equals < 0 ? parameter : parameter.slice(0, equals);
      if (defined.has(decodedName(name))) return parameter;
      const shownName = name.length <= LOGGED_NAME_MAX ? name : REDACTED;
      return equals < 0 ? shownName : `${shownName}=${REDACTED}`;
    });
  return `${url.slice(0, queryAt + 1)}${parameters.join('&')}`;
}

/**
 * The level of a request's line, by its outcome, so that an alert on error lines means the service
 * failed: a 5xx is `error`, but a 503 (the database away, the node overloaded: a client retries it) and
 * a 429 are `warn`; every other answer, a client's mistake (4xx) included, is `info`.
 */
export function levelOf(status: number): 'error' | 'warn' | 'info' {
  if (status === 503 || status === 429) return 'warn';
  return status >= 500 ? 'error' : 'info';
}

/**
 * One log line per request, written when the response is done: method, URL (query values redacted
 * but for the operation's own parameters), status, time, the client's address (behind
 * TRUSTED_PROXIES, the one their X-Forwarded-For names), the API key's id once known (never the key)
 * and, for an error, its code, at the level its outcome deserves (levelOf). Headers are never logged
 * (so no Authorization value can leak), nor is the incoming-request line.
 *
 * The `info` lines (every answer but errors, 429 and 503) are written together at the end of the
 * event loop's turn that answered them, each still with its own request id and figures: under load a
 * turn answers several requests, and writing their lines one after the other keeps the logger's code
 * and data in the CPU's caches, where a line written between two requests finds them cold (6 to 15%
 * of a `get`'s CPU, docs/benchmarks.md). Other lines are written at once.
 *
 * Their JSON is pino's own; the JSON logger's destination writes them out in batches (logging.ts).
 */
export class RequestLog extends LogController {
  readonly #logSuccesses: boolean;
  /** Info lines not yet written: each request's logger (its id bound) and its line, in turn. */
  #pending: (FastifyBaseLogger | RequestLine)[] = [];

  /**
   * `logSuccesses` false (LOG_REQUESTS=false) keeps only the lines of requests that errored: a line
   * per request takes 10 to 20% of the CPU of a `get` or a `list` (docs/benchmarks.md).
   */
  constructor(logSuccesses = true) {
    // Every line a request logs carries its id, the one echoed in X-Request-Id.
    super({ requestIdLogLabel: 'requestId' });
    this.#logSuccesses = logSuccesses;
  }

  override incomingRequest(): void {}

  override requestCompleted(error: Error | null, request: FastifyRequest, reply: FastifyReply): void {
    if (!error && !this.#logSuccesses) return;
    const statusCode = reply.statusCode;
    const line: RequestLine = {
      // The request logger's own binding, first: the line is written through its parent (write below).
      requestId: request.id,
      method: request.method,
      url: loggableUrl(request.url, definedParameters(request)),
      statusCode,
      ms: Math.round(reply.elapsedTime * 100) / 100,
      clientAddress: request.ip,
      // Undefined values are left out of the line: no key id before authentication, no code for a 2xx.
      apiKeyId: request.apiKeyId || undefined,
      code: statusCode >= 400 ? ERROR_CODE_BY_STATUS.get(statusCode) : undefined,
      // Only while tracing is on (tracing/server-spans.ts).
      traceId: request.traceId,
    };
    if (error) {
      write(reply.log, 'error', { ...line, err: error }, 'request errored');
      return;
    }
    const level = levelOf(statusCode);
    if (level !== 'info') {
      write(reply.log, level, line, 'request');
      return;
    }
    if (this.#pending.length === 0) setImmediate(this.#writePending);
    this.#pending.push(reply.log, line);
  }

  readonly #writePending = () => {
    const pending = this.#pending;
    this.#pending = [];
    for (let i = 0; i < pending.length; i += 2)
      write(pending[i] as FastifyBaseLogger, 'info', pending[i + 1] as RequestLine, 'request');
  };
}

/**
 * A request's line (its id first), written without making the request's own logger when it has not
 * been made. Any other logger already binds the id: it is left out of the line (pino skips undefined).
 */
function write(
  log: FastifyBaseLogger,
  level: 'info' | 'warn' | 'error',
  line: RequestLine & { err?: Error },
  message: string,
): void {
  if (log instanceof RequestLogger) log.line(level, line as unknown as Record<string, unknown>, message);
  else log[level]({ ...line, requestId: undefined }, message);
}

export interface RequestLine {
  requestId: string;
  method: string;
  url: string;
  statusCode: number;
  ms: number;
  clientAddress: string;
  apiKeyId: string | undefined;
  code: string | undefined;
  traceId: string | undefined;
}
