import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What a scrape answers: the exposition and its content type. */
export interface Scrape {
  contentType: string;
  text: string;
}

/** GET /metrics on a listener of its own (METRICS_PORT). */
export interface MetricsListener {
  /** The port it listens on (METRICS_PORT, or the one picked for 0). */
  port: number;
  close(): Promise<void>;
}

function answerError(res: ServerResponse, status: 404 | 405 | 500, headers: Record<string, string> = {}) {
  const [code, message] =
    status === 404
      ? ['not_found', 'no resource at this address']
      : status === 405
        ? ['method_not_allowed', 'GET /metrics only']
        : ['internal_error', 'an unexpected error occurred'];
  res
    .writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers })
    .end(JSON.stringify({ code, message, status }));
}

/** The API's limits on slow clients (HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS), which a scrape port keeps too. */
export interface ListenerTimeouts {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
}

/**
 * Connections the scrape port keeps at once: a few scrapers, never the process's descriptors. Past it,
 * one more is closed as it arrives.
 */
export const METRICS_MAX_CONNECTIONS = 32;
/** An idle scraper's connection is closed after this long (Prometheus scrapes every 15 to 60 s). */
const METRICS_KEEP_ALIVE_MS = 5_000;

/**
 * Serves GET /metrics and nothing else, apart from the API: a plain node:http server, so the API's
 * hooks (auth, rate limits, request lines, the request counters themselves) never run for a scrape,
 * and a network policy can expose one port to Prometheus and the other to clients. Every other address
 * answers 404, in the API's Error body. It keeps the API port's timeouts: with Node's defaults a silent
 * or trickling connection stayed open 80 s or more.
 */
export async function listenForMetrics(
  host: string,
  port: number,
  scrape: () => Promise<Scrape>,
  { headersTimeoutMs, requestTimeoutMs }: ListenerTimeouts,
): Promise<MetricsListener> {
  const options = {
    headersTimeout: headersTimeoutMs,
    requestTimeout: requestTimeoutMs,
    connectionsCheckingInterval: Math.min(1_000, headersTimeoutMs),
  };
  const server: Server = createServer(options, (req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics') return answerError(res, 404);
    if (req.method !== 'GET' && req.method !== 'HEAD') return answerError(res, 405, { allow: 'GET, HEAD' });
    scrape().then(
      ({ contentType, text }) => {
        res.writeHead(200, { 'content-type': contentType });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      () => answerError(res, 500),
    );
  });
  server.keepAliveTimeout = METRICS_KEEP_ALIVE_MS;
  server.maxConnections = METRICS_MAX_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    const refused = (error: NodeJS.ErrnoException) =>
      reject(new Error(`cannot listen on METRICS_PORT ${port}: ${error.code ?? error.message}`));
    server.once('error', refused);
    server.listen({ host, port }, () => {
      server.off('error', refused);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
