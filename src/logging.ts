import type { FastifyServerOptions } from 'fastify';
import { type DestinationStream, type Logger, pino } from 'pino';
import type { Config } from './config/config.js';

/**
 * The one logger configuration of every process: a single server, each worker of `serve --workers`
 * and their primary write the same JSON lines (or, with LOG_FORMAT=pretty, the same readable ones).
 */
/** JSON lines on stdout by default; LOG_FORMAT=pretty turns them into readable lines for a terminal. */
export async function loggerOptions(
  config: Config,
): Promise<Exclude<FastifyServerOptions['logger'], boolean | undefined> & { stream: DestinationStream }> {
  const options = {
    level: config.logLevel,
    redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' },
  };
  if (config.logFormat === 'json') return { ...options, stream: logDestination() };
  // Loaded only when asked for: a process writing JSON lines never loads it.
  const { default: pretty } = await import('pino-pretty');
  // sync: a line written just before process.exit (a shutdown) is not lost.
  const stream = pretty({ translateTime: 'SYS:yyyy-mm-dd HH:MM:ss.l', ignore: 'pid,hostname', sync: true });
  return { ...options, stream };
}

/** Bytes of request lines gathered before they are written (one write(2) for a few dozen of them). */
const LOG_BUFFER_BYTES = 4096;
/** The longest a request line waits in that buffer when traffic is too light to fill it. */
const LOG_FLUSH_MS = 100;

/** The destinations' flushes, called by one exit listener (a process that builds many apps, tests, adds one). */
const flushedAtExit = new Set<() => void>();

/**
 * stdout, with the info line of each answered request (pino's `"level":30` line whose message is
 * `request`) written in batches: those lines gather in memory until 4 KiB or 100 ms, then go out in one
 * write instead of one write each. Every other line (start-up, warnings, errors, errored requests,
 * shutdown) is written at once, after the lines held before it, so the order is kept. pino writes every
 * line; only where it goes is decided here, by the line's first and last bytes. The lines are held here,
 * as one string, not in pino's destination (sonic-boom): its own buffer measures the bytes of everything
 * it holds again at every line it is given, 1.2 µs a line at 4 KiB (docs/benchmarks.md); it is handed
 * each batch whole. The writes are synchronous (pino's default): one write(2) of 4 KiB on the event loop
 * costs less CPU than handing it to libuv's thread pool and taking its completion back (about 5% of a
 * `get`). The held lines are written out when the process exits, by a shutdown, process.exit or an
 * uncaught exception. What this trades: a process killed outright (SIGKILL, the kernel's OOM killer, a
 * power loss) loses the request lines of its last 100 ms at most; docs/operations.md says so.
 */
function logDestination(): DestinationStream & { flush(): void } {
  if (flushedAtExit.size === 0)
    process.once('exit', () => {
      for (const flush of flushedAtExit) flush();
    });
  const stdout = pino.destination({ dest: 1, sync: true });
  let held = '';
  const flush = () => {
    if (held === '') return;
    const batch = held;
    held = '';
    stdout.write(batch);
  };
  setInterval(flush, LOG_FLUSH_MS).unref();
  flushedAtExit.add(flush);
  return {
    write(line: string) {
      if (isRequestInfoLine(line)) {
        held += line;
        // Length in characters, not bytes: a threshold, and a URL's few non-ASCII characters change little.
        if (held.length >= LOG_BUFFER_BYTES) flush();
        return;
      }
      flush();
      stdout.write(line);
    },
    flush,
  };
}

/** An answered request's info line as pino writes it (request-log.ts): level first, message last. */
export const isRequestInfoLine = (line: string): boolean =>
  line.startsWith('{"level":30,') && line.endsWith(',"msg":"request"}\n');

/** A logger for a process that serves no requests itself (the primary of `serve --workers`). */
export async function createLogger(config: Config): Promise<Logger> {
  const { stream, ...options } = await loggerOptions(config);
  return pino(options as pino.LoggerOptions, stream);
}
