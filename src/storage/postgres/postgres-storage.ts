import pg from 'pg';
import { ApiKeyCache } from '../../domain/api-key-cache.js';
import type { EventStore } from '../../domain/events.js';
import type {
  ApiKeyStore,
  IdempotencyStore,
  OrderStore,
  PetStore,
  PoolStats,
  SchemaVersions,
  Storage,
} from '../../domain/storage.js';
import type { DeliveryQueue, WebhookEndpointStore } from '../../domain/webhooks.js';
import type { SharedRedis } from '../../redis.js';
import { offerUntranslated } from '../boundary.js';
import { offerReplicaReads } from '../replica-reads.js';
import { toStorageError, translateUnavailable } from '../unavailable.js';
import { PostgresApiKeyStore } from './api-keys.js';
import { PostgresDeliveryQueue } from './delivery-queue.js';
import { isPostgresUnavailable } from './errors.js';
import { PostgresEventStore } from './events.js';
import { PostgresIdempotencyStore } from './idempotency.js';
import { migrate } from './migrations.js';
import { PostgresNotifications } from './notifications.js';
import { PostgresOrderStore } from './orders.js';
import { PostgresPetStore } from './pets.js';
import { currentReadScope } from './read-scope.js';
import { ReadRouter } from './replicas.js';
import { PostgresSecrets } from './secrets.js';
import { followWrites, type ReadPool, type WriteFollower } from './transaction.js';
import { PostgresWebhookEndpointStore } from './webhook-endpoints.js';
import {
  MemoryWritePositions,
  RedisWritePositions,
  UNKNOWN_POSITION,
  type WritePositions,
} from './write-positions.js';

export interface PostgresOptions {
  /** Connections this process may hold (DATABASE_POOL_SIZE). */
  poolSize: number;
  /** Longest wait for a connection, a statement or a lock (DATABASE_TIMEOUT_MS). */
  timeoutMs: number;
  /** The key cache's clock (milliseconds): a test moves it past KEY_CACHE_TTL_MS instead of waiting. */
  now?: () => number;
  /** Streaming replicas of the primary for the API's reads (DATABASE_REPLICA_URLS); none by default. */
  replicaUrls?: readonly string[];
  /** A replica further behind than this is not read from (DATABASE_REPLICA_MAX_LAG_MS). */
  replicaMaxLagMs?: number;
  /** Where keys' write positions are shared between nodes (REDIS_URL); this process only when unset. */
  redis?: SharedRedis | undefined;
}

/**
 * How long a key's write position is kept. Past it any replica still in use has replayed the write:
 * one in use is within the lag bound, far shorter (GitLab keeps its positions 30 s).
 */
const writePositionTtlMs = (maxLagMs: number) => Math.max(30_000, maxLagMs * 10);

/** Records each write of a caller in a read scope, for its key, on the replicas' router. */
function writesFollowedBy(router: ReadRouter): WriteFollower {
  return {
    writer: () => currentReadScope()?.key,
    wrote: (key, lsn) => router.wrote(key, lsn),
    // Asked after the write committed: a failure must not fail the write. Not knowing, the key's
    // reads go to the primary until its position expires.
    position: () => router.primaryPosition().catch(() => UNKNOWN_POSITION),
  };
}

/**
 * int8 columns (ids, categoryId, count(*)) parsed to bigint. node-postgres returns them as strings by
 * default, and Number() would round anything beyond 2^53; this stays exact. Scoped to our pool rather
 * than set on pg.types, so no other code in the process is affected.
 */
const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8 && format !== 'binary'
      ? BigInt
      : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};

/**
 * How much longer than DATABASE_TIMEOUT_MS the client waits for an answer. PostgreSQL itself cancels a
 * statement or a lock wait at the bound (statement_timeout, lock_timeout) and says so; this is for when
 * it cannot say anything (a stalled network, a frozen server), and the connection is then thrown away.
 */
const CLIENT_MARGIN_MS = 1_000;

/** The readiness probe's own bound: /readyz answers within a second. */
const PROBE_TIMEOUT_MS = 900;

/** The pool every PostgresStorage uses (the benchmark's bare-query figure uses it too). */
export function newPool(url: string, { poolSize, timeoutMs }: PostgresOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    // How an operator tells the service's connections apart in pg_stat_activity (the URL may override).
    application_name: 'petstore',
    max: poolSize,
    // Waiting for a free connection, or for the server to accept one, ends here.
    connectionTimeoutMillis: timeoutMs,
    statement_timeout: timeoutMs,
    lock_timeout: timeoutMs,
    // A transaction left open by a client that vanished must not hold its locks for long.
    idle_in_transaction_session_timeout: timeoutMs * 2,
    query_timeout: timeoutMs + CLIENT_MARGIN_MS,
    // A peer that vanished without a FIN or RST is found by the kernel, not only by a query timing out.
    keepAlive: true,
    types,
  });
  // An idle connection that breaks (a server restart, a network cut) is dropped by the pool and
  // replaced on next use; without a listener the 'error' event would crash the process.
  pool.on('error', () => undefined);
  return pool;
}

/** The replicas' router, probed once before the first request, when DATABASE_REPLICA_URLS names any. */
async function openReplicas(primary: pg.Pool, options: PostgresOptions): Promise<ReadRouter | undefined> {
  const urls = options.replicaUrls ?? [];
  if (urls.length === 0) return undefined;
  const maxLagMs = options.replicaMaxLagMs ?? 1_000;
  const ttlMs = writePositionTtlMs(maxLagMs);
  let positions: WritePositions;
  if (options.redis) {
    // Prefixed with the primary's identity: two clusters sharing one Redis keep their positions apart.
    const { rows } = await primary.query<{ id: string }>(
      'SELECT system_identifier::text AS id FROM pg_control_system()',
    );
    positions = new RedisWritePositions(
      options.redis.client,
      `petstore:wal:${rows[0]?.id ?? ''}:`,
      ttlMs,
      options.redis.health,
    );
  } else {
    positions = new MemoryWritePositions(ttlMs);
  }
  const router = new ReadRouter({
    primary,
    replicas: urls.map((url) => ({ url, pool: newPool(url, options) })),
    positions,
    maxLagMs,
  });
  await router.start();
  return router;
}

/**
 * For several nodes on one database. A pet's 201 is durable once COMMIT returns: PostgreSQL's default
 * synchronous_commit=on flushes the write-ahead log first (keep it on).
 */
export class PostgresStorage implements Storage {
  readonly pets: PetStore;
  readonly orders: OrderStore;
  readonly apiKeys: ApiKeyStore;
  readonly idempotency: IdempotencyStore;
  readonly events: EventStore;
  readonly webhookEndpoints: WebhookEndpointStore;
  readonly deliveries: DeliveryQueue;
  readonly schema: SchemaVersions;
  readonly #pool: pg.Pool;
  readonly #notifications: PostgresNotifications;
  readonly #secrets: PostgresSecrets;
  readonly #router: ReadRouter | undefined;

  private constructor(
    pool: pg.Pool,
    url: string,
    schema: SchemaVersions,
    now: () => number = Date.now,
    router?: ReadRouter,
  ) {
    this.#pool = pool;
    this.#router = router;
    this.schema = schema;
    const reads: ReadPool = router ?? pool;
    // With replicas, the stores write through a pool whose every write records, for the caller in a
    // read scope, the primary's position once committed (read-your-writes): whatever the method.
    const writes = router ? followWrites(pool, writesFollowedBy(router)) : pool;
    const idempotency = new PostgresIdempotencyStore(writes);
    this.#notifications = new PostgresNotifications(url);
    const stores = {
      pets: new PostgresPetStore(writes, idempotency.pets, reads),
      orders: new PostgresOrderStore(writes, idempotency.orders, reads),
      idempotency,
      events: new PostgresEventStore(writes, this.#notifications, reads),
      webhookEndpoints: new PostgresWebhookEndpointStore(writes, reads),
      deliveries: new PostgresDeliveryQueue(writes, this.#notifications, idempotency.recoveries, reads),
    };
    this.pets = translateUnavailable(stores.pets, isPostgresUnavailable);
    this.orders = translateUnavailable(stores.orders, isPostgresUnavailable);
    // A lookup is a round trip here: a key found active is trusted for KEY_CACHE_TTL_MS.
    this.apiKeys = new ApiKeyCache(
      translateUnavailable(new PostgresApiKeyStore(pool), isPostgresUnavailable),
      { rememberActive: true },
      now,
    );
    this.idempotency = translateUnavailable(stores.idempotency, isPostgresUnavailable);
    this.events = translateUnavailable(stores.events, isPostgresUnavailable);
    this.webhookEndpoints = translateUnavailable(stores.webhookEndpoints, isPostgresUnavailable);
    this.deliveries = translateUnavailable(stores.deliveries, isPostgresUnavailable);
    // The app's boundary translates in its own pass (boundary.ts).
    offerUntranslated(this, stores, (error) => toStorageError(error, isPostgresUnavailable));
    this.#secrets = translateUnavailable(new PostgresSecrets(pool), isPostgresUnavailable);
    // Where reads were served, and each replica's state: for the app's metrics and log (replica-reads.ts).
    if (router)
      offerReplicaReads(this, { stats: () => router.stats(), watch: (listener) => router.watch(listener) });
  }

  /** Connects and applies pending migrations; rejects when the database cannot be reached. */
  static async open(url: string, options: PostgresOptions): Promise<PostgresStorage> {
    // Migrations on a connection of their own, without the statement bound: building an index on a
    // large table may take longer than any request should. Connecting is still bounded.
    const migrations = new pg.Pool({
      connectionString: url,
      max: 1,
      connectionTimeoutMillis: options.timeoutMs,
      types,
    });
    let schema: SchemaVersions;
    try {
      schema = await migrate(migrations);
    } finally {
      await migrations.end();
    }
    const pool = newPool(url, options);
    const router = await openReplicas(pool, options);
    return new PostgresStorage(pool, url, schema, options.now, router);
  }

  sharedSecret(name: string): Promise<Buffer> {
    return this.#secrets.get(name);
  }

  poolStats(): PoolStats {
    return { total: this.#pool.totalCount, idle: this.#pool.idleCount, waiting: this.#pool.waitingCount };
  }

  /** A real write, committed: a database that answers but cannot write (full, read-only) fails. */
  async ping(): Promise<void> {
    try {
      await this.#pool.query({
        text: `INSERT INTO readiness_probe (id, checked_at) VALUES (1, now())
               ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at`,
        query_timeout: PROBE_TIMEOUT_MS,
      } as pg.QueryConfig);
    } catch (error) {
      throw toStorageError(error, isPostgresUnavailable);
    }
  }

  async analyze(): Promise<void> {
    // Autovacuum would get there too, but only a minute or more after a bulk load.
    await this.#pool.query('ANALYZE pets, orders, api_keys, events, webhook_endpoints');
  }

  async close(): Promise<void> {
    await Promise.all([this.pets.settled(), this.orders.settled(), this.#notifications.close()]);
    await this.#router?.close();
    if (!this.#pool.ended) await this.#pool.end();
  }
}
