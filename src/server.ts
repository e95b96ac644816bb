import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config/config.js';
import { ensureFirstApiKey } from './domain/api-keys.js';
import { openStorage } from './storage/open-storage.js';

export interface RunningServer {
  app: FastifyInstance;
  /** Where it listens, e.g. http://127.0.0.1:3000. */
  url: string;
  /** Stops accepting, lets in-flight requests finish, then closes the database. */
  close(): Promise<void>;
}

// Explicit, so a slow or silent client cannot hold a connection for Node's 5-minute default.
const REQUEST_TIMEOUT_MS = 30_000; // the whole request, headers and body
const HEADERS_TIMEOUT_MS = 10_000;
// Longer than common load balancers' idle timeout (60 s), so they, not we, close idle connections.
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/** The one entry point that listens: opens storage, builds the app, listens. */
export async function startServer(config: Config): Promise<RunningServer> {
  const storage = await openStorage(config.databaseUrl);
  const app = await buildApp({ config, storage });
  app.server.requestTimeout = REQUEST_TIMEOUT_MS;
  app.server.headersTimeout = HEADERS_TIMEOUT_MS;
  app.server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;

  await app.listen({ host: config.host, port: config.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  // Only once the service is reachable: a key created by a start that then failed would never be shown.
  const firstKey = await ensureFirstApiKey(storage.apiKeys, config.apiKeys, new Date());
  if (firstKey) printFirstKey(firstKey, url);

  let closing: Promise<void> | undefined;
  return {
    app,
    url,
    close: () => {
      closing ??= app.close().then(() => storage.close());
      return closing;
    },
  };
}

function printFirstKey(secret: string, url: string): void {
  process.stderr.write(
    [
      '',
      'No API key existed, so this one was created. It is shown only this once; keep it:',
      '',
      `  ${secret}`,
      '',
      'Try it:',
      `  curl -H "Authorization: Bearer ${secret}" ${url}/v1/pets`,
      '',
      'Manage keys with: petstore keys create | list | revoke <id>',
      '',
    ].join('\n'),
  );
}
