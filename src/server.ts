import cluster from 'node:cluster';
import type { FastifyInstance } from 'fastify';
import { buildApp, type Role } from './app.js';
import type { Config } from './config/config.js';
import { ensureFirstApiKey } from './domain/api-keys.js';
import type { ApiKeyStore } from './domain/storage.js';
import type { GuardedServer } from './http/connection/connections.js';
import { listenForMetrics, type MetricsListener } from './http/observability/metrics-listener.js';
import { openRedis, redisWanted } from './redis.js';
import { databaseKind, databaseLocation, openStorage } from './storage/open-storage.js';
import type { Tracing } from './tracing/tracing.js';
import { tracingWanted } from './tracing/wanted.js';
import { NODE_VERSION, VERSION } from './version.js';

export interface RunningServer {
  app: FastifyInstance;
  /** Where it listens, e.g. http://127.0.0.1:3000. */
  url: string;
  /** Closes the listening socket only; connections already open are served as usual. */
  stopAccepting(): void;
  /** Stops accepting, drains every connection (see GuardedServer), then closes the database. */
  close(): Promise<void>;
}

export interface StartOptions {
  /**
   * Whether this process creates and prints the first API key when none exists. A cluster worker says
   * no: its primary does it once, rather than every worker racing to create one.
   */
  createFirstKey?: boolean;
  /** `petstore serve --role`: the API, the deliveries, or both (the default). */
  role?: Role;
}

/** The one entry point that listens: opens storage, builds the app, listens. */
export async function startServer(
  config: Config,
  { createFirstKey = true, role = 'all' }: StartOptions = {},
): Promise<RunningServer> {
  // Only when an OTLP endpoint is configured is the OpenTelemetry SDK loaded at all.
  const tracing: Tracing | undefined = tracingWanted()
    ? (await import('./tracing/tracing.js')).startTracing(databaseKind(config.databaseUrl))
    : undefined;
  // The one connection to Redis, when REDIS_URL is set: the storage's write positions and the app's rate
  // limits share it (redis.ts).
  const redisUrl = redisWanted(config);
  const redis = redisUrl ? await openRedis(redisUrl) : undefined;
  const storage = await openStorage(config, Date.now, redis).catch(async (error: unknown) => {
    await redis?.close();
    throw error;
  });
  let app: FastifyInstance | undefined;
  let metrics: MetricsListener | undefined;
  let closing: Promise<void> | undefined;
  const server = () => app?.server as GuardedServer | undefined;
  const close = () => {
    closing ??= (async () => {
      await server()?.drain();
      await app?.close();
      await metrics?.close();
      await storage.close();
      await redis?.close();
      // The spans of the last requests and deliveries are exported before the process ends; a collector
      // that is away loses them, with a warning, but does not fail the stop.
      await tracing
        ?.shutdown()
        .catch((error: unknown) => app?.log.warn({ err: error }, 'traces: the last spans were not exported'));
    })();
    return closing;
  };
  try {
    // Serving both, deliveries run on a thread of their own (delivery-thread.ts).
    app = await buildApp({ config, storage, tracing, role, redis, deliveryThread: true });
    // The first line of every start: which build runs, on which Node.js, in which role.
    app.log.info(
      { version: VERSION, node: NODE_VERSION, role },
      `petstore ${VERSION} on Node.js ${NODE_VERSION} (role: ${role})`,
    );
    // A relative sqlite: path depends on the working directory: say which database this start opened.
    app.log.info(`database: ${databaseLocation(config.databaseUrl)}`);
    // Under --workers the primary serves METRICS_PORT, for every worker (cluster.ts).
    if (config.metrics && !cluster.isWorker) {
      const { host, port } = config.metrics;
      const listening = app;
      metrics = await listenForMetrics(host, port, () => listening.scrapeMetrics(), config);
      app.log.info(`metrics listening at ${serverUrl(host, metrics.port)}/metrics`);
    }
    await app.listen({ host: config.host, port: config.port });
    const address = app.server.address();
    const url = serverUrl(config.host, typeof address === 'object' && address ? address.port : config.port);
    // Only once the service is reachable: a key created by a start that then failed would never be shown.
    if (createFirstKey) await announceFirstKey(storage.apiKeys, config, url);
    return { app, url, stopAccepting: () => server()?.stopAccepting(), close };
  } catch (error) {
    // Start-up completes or leaves nothing behind: never a process that serves without its handlers.
    await close().catch(() => undefined);
    throw error;
  }
}

/** Where a server listening on host:port is reached, e.g. http://127.0.0.1:3000 or http://[::1]:3000. */
export function serverUrl(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** Creates the first API key when none exists at all, and prints it once with a curl line for `url`. */
export async function announceFirstKey(apiKeys: ApiKeyStore, config: Config, url: string): Promise<void> {
  const secret = await ensureFirstApiKey(apiKeys, config.apiKeys, new Date());
  if (secret !== undefined) process.stderr.write(`\n${firstKeyMessage(secret, url)}\n`);
}

/** What the first start prints about the key it created (the README quotes it; a test keeps them equal). */
export function firstKeyMessage(secret: string, url: string): string {
  return [
    'No API key existed, so this one was created. It is shown only this once; keep it:',
    '',
    `  ${secret}`,
    '',
    'Try it:',
    `  curl -H "Authorization: Bearer ${secret}" ${url}/v1/pets`,
    '',
    // `npx`: in a checkout the executable is not on the PATH, and npx finds it there and where installed.
    'Manage keys with: npx petstore keys create | list | revoke <id>',
  ].join('\n');
}
