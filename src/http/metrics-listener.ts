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

/**
 * Serves GET /metrics and nothing else, apart from the API: a plain node:http server, so the API's
 * hooks (auth, rate limits, request lines, the request counters themselves) never run for a scrape,
 * and a network policy can expose one port to Prometheus and the other to clients. Every other address
 * answers 404, in the API's Error body.
 */
export async function listenForMetrics(
  host: string,
  port: number,
  scrape: () => Promise<Scrape>,
): Promise<MetricsListener> {
  const server: Server = createServer((req, res) => {
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
