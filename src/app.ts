import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { SchemaObject } from 'ajv';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import {
  deleteOldEvents,
  deliverInBackground,
  deliverOnThread,
  pruneExpiredIdempotencyKeys,
  recordLastUseInBackground,
} from './background-jobs.js';
import type { Config } from './config/config.js';
import { ApiKeyLastUse } from './domain/api-key-last-use.js';
import { ApiKeyVerifier } from './domain/api-keys.js';
import { EventFeed } from './domain/event-feed.js';
import { pruneIdempotencyKeys } from './domain/idempotency.js';
import { LiveEvents } from './domain/live-events.js';
import { CursorCodec } from './domain/paging.js';
import { PetCatalog } from './domain/pet-catalog.js';
import type { Storage } from './domain/storage.js';
import { StoreOrders } from './domain/store-orders.js';
import type { TokenBuckets } from './domain/token-bucket.js';
import { WebhookEndpoints } from './domain/webhook-endpoints.js';
import { answerClientError, answerConnect } from './http/connection/client-errors.js';
import { GuardedServer } from './http/connection/connections.js';
import { draining } from './http/connection/draining.js';
import { consolePage } from './http/documents/console.js';
import { docs } from './http/documents/docs.js';
import { openApi } from './http/documents/openapi.js';
import { metricsEndpoint, ServiceMetrics } from './http/observability/metrics.js';
import { requestIdFor } from './http/observability/request-id.js';
import { RequestLog } from './http/observability/request-log.js';
import { RequestLogger } from './http/observability/request-logger.js';
import { StorageOutage } from './http/observability/storage-outage.js';
import { authentication } from './http/request/auth.js';
import { AuthFailureLimiter } from './http/request/auth-failures.js';
import { conditionalRequests } from './http/request/conditional-requests.js';
import { contentCodings } from './http/request/content-coding.js';
import { corsPolicy } from './http/request/cors.js';
import { errorHandling, sendError, toApiError } from './http/request/errors.js';
import { expectations } from './http/request/expect.js';
import { jsonBody } from './http/request/json-body.js';
import { shedLoad } from './http/request/overload.js';
import { rateLimit } from './http/request/rate-limit.js';
import { readFromReplica, readScope } from './http/request/read-scope.js';
import { requestHead } from './http/request/request-head.js';
import { routeFallbacks } from './http/request/routing.js';
import { scopes } from './http/request/scopes.js';
import { buildSharedSerializers } from './http/request/serialization.js';
import { createValidatorCompiler, describeValidationErrors } from './http/request/validation.js';
import { EventStreams } from './http/routes/event-stream.js';
import { eventRoutes } from './http/routes/events.js';
import { healthRoutes } from './http/routes/health.js';
import { Links } from './http/routes/links.js';
import { orderRoutes } from './http/routes/orders.js';
import { petRoutes } from './http/routes/pets.js';
import { streamSlots } from './http/routes/stream-slots.js';
import { webhookRoutes } from './http/routes/webhooks.js';
import { ErrorBody } from './http/schemas/error.js';
import { EVENT_SCHEMAS } from './http/schemas/event.js';
import { ORDER_SCHEMAS } from './http/schemas/order.js';
import { PET_SCHEMAS } from './http/schemas/pet.js';
import { WEBHOOK_SCHEMAS } from './http/schemas/webhook.js';
import { loggerOptions } from './logging.js';
import { MemoryBuckets } from './rate-limit/memory-buckets.js';
import { redisWanted, type SharedRedis } from './redis.js';
import { type ReplicaChange, type ReplicaReads, replicaReads } from './storage/replica-reads.js';
import type { Tracing } from './tracing/tracing.js';

export interface AppOptions {
  config: Config;
  storage: Storage;
  /** The clock; tests set it to stand on either side of getPet's sunset, or of a key's expiry. */
  now?: () => Date;
  /**
   * What this process does (`petstore serve --role`): serve the API, deliver webhooks, or both (the
   * default). A tool that only builds the app to look at it asks for `api`.
   */
  role?: Role;
  /** A pino logger configuration or instance; defaults to JSON lines on stdout at config.logLevel. */
  logger?: FastifyServerOptions['logger'] | FastifyServerOptions['loggerInstance'];
  /** Tracing, when it is on (server.ts starts it): spans of requests, storage calls and deliveries. */
  tracing?: Tracing | undefined;
  /**
   * In the `all` role, deliver on a thread of its own (its own event loop and database connection), as
   * `petstore serve` does; off, on this thread, with this storage and clock (tests that set either).
   */
  deliveryThread?: boolean;
  /**
   * The service's Redis (REDIS_URL), opened once by whoever opened the storage (server.ts), which shares
   * it: required when REDIS_URL is set. Its failures are logged and counted here.
   */
  redis?: SharedRedis | undefined;
}

const SHARED_SCHEMAS = [
  ErrorBody,
  ...PET_SCHEMAS,
  ...ORDER_SCHEMAS,
  ...EVENT_SCHEMAS,
  ...WEBHOOK_SCHEMAS,
] as unknown as SchemaObject[];

/**
 * `api` serves the API and delivers nothing; `deliver` delivers webhooks and answers only the probes and
 * /metrics; `all` does both. Every mix of roles shares one database.
 */
export const ROLES = ['all', 'api', 'deliver'] as const;
export type Role = (typeof ROLES)[number];

/** Composes the service: plugins, error handling, then routes. Listening is server.ts's job. */
export async function buildApp({
  config,
  storage,
  now = () => new Date(),
  role = 'all',
  logger,
  tracing,
  deliveryThread = false,
  redis,
}: AppOptions) {
  if (redisWanted(config) && !redis)
    throw new Error('REDIS_URL is set and used: buildApp needs the Redis opened for it (openRedis)');
  const app = Fastify(await fastifyOptions(config, logger)).withTypeProvider<TypeBoxTypeProvider>();

  app.server.on('connect', answerConnect);
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  app.setValidatorCompiler(createValidatorCompiler(SHARED_SCHEMAS));

  // First, so that its span covers every other hook; not registered at all when tracing is off.
  if (tracing) await app.register(tracing.serverSpans, { tracer: tracing.tracer });
  // Named plugins: each declares the ones it must come after, and Fastify refuses a wrong order.
  await app.register(errorHandling);
  await app.register(expectations);
  await app.register(requestHead);
  await app.register(jsonBody, { bodyLimit: config.bodyLimit });
  await app.register(contentCodings);
  await app.register(draining);
  await app.register(routeFallbacks);
  // A delivery process answers the probes and /metrics alone: every other path is 404 there.
  const servesApi = role !== 'deliver';
  await app.register(openApi, {
    publicBaseUrl: config.publicBaseUrl,
    stagingBaseUrl: config.stagingBaseUrl,
    serveDocument: servesApi,
  });
  if (servesApi) {
    await app.register(corsPolicy, { origins: config.corsOrigins });
    if (config.docsEnabled) await app.register(docs);
    await app.register(consolePage);
  }

  const metrics = new ServiceMetrics(storage);
  // Whichever part fails (the connection, the write positions), logged once per outage and counted.
  redis?.health.report({ log: app.log, errors: metrics.redisErrors });
  // Only PostgreSQL with DATABASE_REPLICA_URLS reads from replicas (replica-reads.ts).
  const replicas = replicaReads(storage);
  replicas?.watch(logReplicaChange(app.log));
  metrics.watchConnections(app.server as GuardedServer);
  await app.register(metricsEndpoint, { metrics, route: config.metrics === undefined });
  // One wrapper per store around every call the app makes: errors counted, outages logged, and with
  // tracing a span per call (storage/boundary.ts).
  const spans = tracing?.storage;
  const store = metrics.instrument(
    storage,
    new StorageOutage(app.log),
    spans && ((operation, run) => spans.around(operation, run)),
  );
  const links = new Links(config.publicBaseUrl);
  const cursorSecret = await store.sharedSecret('cursor');
  const catalog = new PetCatalog(store.pets, new CursorCodec(cursorSecret), now);
  const orders = new StoreOrders(store.orders, new CursorCodec(cursorSecret, 'orders'), now);
  const lastUse = new ApiKeyLastUse(store.apiKeys);
  recordLastUseInBackground(app, lastUse);
  const verifier = new ApiKeyVerifier(store.apiKeys, config.apiKeys, now, (hash, at) =>
    lastUse.used(hash, at),
  );
  pruneExpiredIdempotencyKeys(app, () => pruneIdempotencyKeys(store.idempotency, now()));
  const buckets = await openTokenBuckets(config, app, now, redis);
  const feed = new EventFeed(store.events);
  const streams = openEventStreams(app, { config, store, replicas, metrics, verifier, buckets });
  const endpoints = webhookEndpoints(config, store, cursorSecret, now);
  deleteOldEvents(app, store, config.eventRetentionDays, now);

  await app.register(healthRoutes, { storage, now });
  if (role === 'all' && deliveryThread) deliverOnThread(app, config, metrics);
  else if (role !== 'api') deliverInBackground(app, config, store, metrics, now, tracing);
  if (servesApi) {
    const forRoutes = { catalog, orders, feed, streams, endpoints, links };
    const forChecks = { config, now, verifier, buckets, metrics, scopeReads: replicas !== undefined };
    await app.register(v1Api, { ...forChecks, ...forRoutes, prefix: '/v1' });
  }
  await app.ready();
  return app;
}

/** Fastify's options: the logger, the HTTP server, and how requests are identified, logged and refused. */
async function fastifyOptions(config: Config, logger: AppOptions['logger']): Promise<FastifyServerOptions> {
  // The service's own logger, unless one was given: its request lines are written as text (request-log.ts).
  const ownLogger = logger === undefined ? await loggerOptions(config) : undefined;
  return {
    ...(logger && typeof (logger as { info?: unknown }).info === 'function'
      ? { loggerInstance: logger as FastifyServerOptions['loggerInstance'] }
      : { logger: (logger as FastifyServerOptions['logger']) ?? ownLogger }),
    bodyLimit: config.bodyLimit,
    serverFactory: httpServer(config),
    return503OnClosing: false, // see installDraining
    logController: new RequestLog(config.logRequests),
    // Each request's logger is made on first use: the request line alone needs none (request-logger.ts).
    childLoggerFactory: (logger, bindings, options) => new RequestLogger(logger, bindings, options),
    requestIdHeader: false, // taken by genReqId only once validated
    genReqId: requestIdFor,
    // request.ip: the connecting address, or behind these proxies the client their X-Forwarded-For names.
    trustProxy: config.trustedProxies.length > 0 ? config.trustedProxies : false,
    // Long enough that any petId reaches its own validation (Node caps a request head at 16 KiB anyway).
    routerOptions: { maxParamLength: 16 * 1024 },
    schemaController: { compilersFactory: { buildSerializer: buildSharedSerializers } },
    schemaErrorFormatter: (errors, httpPart) => new Error(describeValidationErrors(errors, httpPart)),
    // Errors found before routing (a malformed URL) take the same Error body as every other.
    frameworkErrors: (error, _request, reply) => sendError(reply, toApiError(error)),
    // ...and so do bytes Node's HTTP parser refuses before they become a request.
    clientErrorHandler: answerClientError,
  };
}

/** One line per change of a replica's state, never one per query. */
function logReplicaChange(log: FastifyBaseLogger): (change: ReplicaChange) => void {
  return (change) =>
    change.setAside
      ? log.warn(
          { replica: change.replica, err: change.error },
          `database replica ${change.replica} set aside: reads go elsewhere; probed again in a few seconds`,
        )
      : log.info({ replica: change.replica }, `database replica ${change.replica} answers again: in use`);
}

/** The live event streams (GET /v1/events as text/event-stream), closed when the app closes. */
function openEventStreams(
  app: FastifyInstance,
  { config, store, replicas, metrics, verifier, buckets }: EventStreamParts,
): EventStreams {
  const streams = new EventStreams({
    live: new LiveEvents(store.events, {
      onError: (error) => app.log.warn({ err: error }, 'reading events for the live streams failed'),
      // With replicas, a stream catches up from one fresh enough, as the feed's pages would be read.
      ...(replicas
        ? { catchUpStore: { list: (query) => readFromReplica(() => store.events.list(query)) } }
        : {}),
    }),
    server: app.server as GuardedServer,
    registry: metrics.registry,
    verifier,
    rateLimit: buckets && { buckets, policy: config.rateLimit },
    slots: streamSlots(config.eventStreams.maxPerKey),
    ...config.eventStreams,
  });
  app.addHook('onClose', async () => streams.closeAll());
  return streams;
}

/** What the live streams are built from. */
interface EventStreamParts {
  config: Config;
  /** The instrumented store. */
  store: Storage;
  replicas: ReplicaReads | undefined;
  metrics: ServiceMetrics;
  verifier: ApiKeyVerifier;
  buckets: TokenBuckets | undefined;
}

/** The webhook use cases, each listing paged by a cursor of its own scope. */
function webhookEndpoints(
  config: Config,
  store: Storage,
  cursorSecret: Buffer,
  now: () => Date,
): WebhookEndpoints {
  return new WebhookEndpoints(
    store.webhookEndpoints,
    store.deliveries,
    config.webhooks.policy,
    {
      endpoints: new CursorCodec(cursorSecret, 'webhook-endpoints'),
      deliveries: new CursorCodec(cursorSecret, 'webhook-deliveries'),
      attempts: new CursorCodec(cursorSecret, 'webhook-attempts'),
    },
    now,
    config.webhooks.maxEndpoints,
    config.eventRetentionDays,
  );
}

/** What /v1 is served with: what its request checks need, and the use cases its routes call. */
interface V1ApiOptions {
  config: Config;
  now: () => Date;
  verifier: ApiKeyVerifier;
  buckets: TokenBuckets | undefined;
  metrics: ServiceMetrics;
  /** Reads may go to replicas: each request's reads are scoped for read-your-writes. */
  scopeReads: boolean;
  catalog: PetCatalog;
  orders: StoreOrders;
  feed: EventFeed;
  streams: EventStreams;
  endpoints: WebhookEndpoints;
  links: Links;
}

/** The API under /v1: its request checks in their order, then its routes. */
const v1Api: FastifyPluginAsyncTypebox<V1ApiOptions> = async (
  v1,
  { config, now, verifier, buckets, metrics, scopeReads, catalog, orders, feed, streams, endpoints, links },
) => {
  // Shed load before anything costs work, then know the caller, then count it (each plugin's
  // dependencies say so too).
  await v1.register(shedLoad, { overload: config.overload });
  await v1.register(authentication, {
    verifier,
    // The service's clock, which tests set: how long an address waits is a matter of time.
    failures: config.authFailures
      ? new AuthFailureLimiter(config.authFailures, () => now().getTime())
      : undefined,
  });
  // Right after knowing the caller, before anything is validated or counted: 403 without the scope.
  await v1.register(scopes);
  // Whose reads these are, for read-your-writes on replicas (the PostgreSQL adapter reads it). Only
  // with replicas: on Node.js 20 an AsyncLocalStorage in use costs every promise of the process.
  if (scopeReads) await v1.register(readScope);
  await v1.register(rateLimit, { buckets, policy: config.rateLimit, metrics });
  // Last before the routes: a 304 is decided once every check above has passed.
  await v1.register(conditionalRequests);
  await v1.register(petRoutes, { catalog, links, now });
  await v1.register(orderRoutes, { orders, links });
  await v1.register(eventRoutes, { feed, links, streams });
  await v1.register(webhookRoutes, { endpoints, links });
};

/** Where rate-limit buckets live (Redis when REDIS_URL is set), or undefined when limiting is off. */
async function openTokenBuckets(
  config: Config,
  app: FastifyInstance,
  now: () => Date,
  redis: SharedRedis | undefined,
): Promise<TokenBuckets | undefined> {
  if (config.rateLimit.perSecond === 0) return undefined;
  let buckets: TokenBuckets;
  if (redis) {
    // Loaded only when used, as ioredis is (redis.ts).
    const { RedisBuckets } = await import('./rate-limit/redis-buckets.js');
    buckets = new RedisBuckets(redis.client);
  } else {
    // The service's clock, which tests set (Redis keeps its own).
    buckets = new MemoryBuckets(() => now().getTime());
  }
  app.addHook('onClose', () => buckets.close());
  return buckets;
}

// Longer than common load balancers' idle timeout (60 s), so they, not we, close idle connections.
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/**
 * The HTTP server, with pipelining bounded per connection and a draining shutdown (connections.ts).
 * Timeouts explicit, so a slow or silent client (headers or body trickled in) cannot hold a connection
 * for Node's defaults (1 and 5 minutes) and, many times over, exhaust the server. Node enforces these
 * only when it sweeps its connections, every connectionsCheckingInterval (30 s by default): swept at
 * least every second here, so a timeout means what it says.
 */
function httpServer(config: Config): NonNullable<FastifyServerOptions['serverFactory']> {
  return (handler) => {
    const server = new GuardedServer(
      {
        headersTimeout: config.headersTimeoutMs,
        requestTimeout: config.requestTimeoutMs,
        connectionsCheckingInterval: Math.min(1_000, config.headersTimeoutMs),
        requireHostHeader: false, // refused in an onRequest hook instead, with the Error body
      },
      handler,
    );
    server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    // Past the cap Node closes a new connection as it arrives ('drop', counted in the metrics) rather
    // than accept until the process runs out of descriptors.
    server.maxConnections = config.maxConnections;
    return server;
  };
}
