import type { Redis } from 'ioredis';

/** Who reports a Redis failure: the connection itself, or one of the parts that use it. */
export type RedisFailureSource = 'connection' | 'write_positions';

/** Where failures are told once the app is built: its logger, and its counter of them (metrics.ts). */
export interface RedisReporting {
  log: {
    warn(object: object, message: string): void;
    info(message: string): void;
  };
  errors: { inc(labels: { source: RedisFailureSource }, value?: number): void };
}

/**
 * What befalls the service's Redis: every failure counted (petstore_redis_errors_total, by source),
 * and each outage of a source logged once, when it starts and when it ends, never once per command or
 * per reconnect attempt. Failures before the app is built (the storage opens first) are kept until it
 * reports them.
 */
export class RedisHealth {
  #reporting: RedisReporting | undefined;
  /** The failures counted before anyone reported them. */
  readonly #uncounted = new Map<RedisFailureSource, number>();
  /** The sources failing now, with the error their outage began with. */
  readonly #failing = new Map<RedisFailureSource, unknown>();

  /** From now on failures go to `reporting`; those before it are counted, an outage still on logged. */
  report(reporting: RedisReporting): void {
    this.#reporting = reporting;
    for (const [source, count] of this.#uncounted) reporting.errors.inc({ source }, count);
    this.#uncounted.clear();
    for (const [source, error] of this.#failing) this.#logFailing(source, error);
  }

  failed(source: RedisFailureSource, error: unknown): void {
    if (this.#reporting) this.#reporting.errors.inc({ source });
    else this.#uncounted.set(source, (this.#uncounted.get(source) ?? 0) + 1);
    if (this.#failing.has(source)) return;
    this.#failing.set(source, error);
    this.#logFailing(source, error);
  }

  succeeded(source: RedisFailureSource): void {
    // One lookup per command that went well: nothing more while Redis is healthy.
    if (this.#failing.size === 0 || !this.#failing.delete(source)) return;
    this.#reporting?.log.info(`redis (${source.replace('_', ' ')}): available again`);
  }

  #logFailing(source: RedisFailureSource, error: unknown): void {
    this.#reporting?.log.warn(
      { err: error },
      source === 'connection'
        ? 'redis: connection lost or refused; reconnecting every 2 s at most, logged again once it is back'
        : `redis (${source.replace('_', ' ')}): a command failed; falling back until one succeeds again`,
    );
  }
}

/**
 * Whether the service uses the REDIS_URL it is given: for shared rate limits (RATE_LIMIT_PER_SECOND
 * above 0) or the read replicas' write positions (DATABASE_REPLICA_URLS). Otherwise no connection is
 * opened and ioredis is not loaded.
 */
export function redisWanted(config: {
  redisUrl: string | undefined;
  rateLimit: { perSecond: number };
  databaseReplicaUrls: readonly string[];
}): string | undefined {
  if (!config.redisUrl) return undefined;
  return config.rateLimit.perSecond > 0 || config.databaseReplicaUrls.length > 0
    ? config.redisUrl
    : undefined;
}

/** A Redis command that does not answer this fast counts as failed: its caller falls back. */
const COMMAND_TIMEOUT_MS = 500;

/**
 * The service's one connection to REDIS_URL, opened where the process starts (server.ts) and shared by
 * every part that uses Redis: the rate limits (app.ts) and the read replicas' write positions (the
 * PostgreSQL storage). Neither may ever wait on Redis: a command fails at once while Redis is away and
 * after 500 ms when it does not answer, and the caller falls back (fails open, reads from the primary).
 * It reconnects, at most every 2 s, for as long as the service runs. Closed by whoever opened it, once
 * both users are closed.
 */
export interface SharedRedis {
  readonly client: Redis;
  readonly health: RedisHealth;
  close(): Promise<void>;
}

/**
 * Connects (see SharedRedis). Resolves once Redis answers or the first attempt fails: the first
 * requests then meet a shared state, not a fallback, and a Redis that is down at start does not stop
 * the start. ioredis is loaded only here: it would add about 20 MiB to every process that does not use it.
 */
export async function openRedis(url: string): Promise<SharedRedis> {
  const { Redis } = await import('ioredis');
  const health = new RedisHealth();
  const client = new Redis(url, {
    // While disconnected, fail each command at once instead of queueing it behind a reconnect.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: 1_000,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2_000),
  });
  // Without a listener ioredis reports each failed reconnect as an unhandled 'error' event.
  client.on('error', (error) => health.failed('connection', error));
  client.on('ready', () => health.succeeded('connection'));
  await new Promise<void>((resolve) => {
    const settle = () => {
      client.off('ready', settle).off('error', settle);
      resolve();
    };
    client.once('ready', settle).once('error', settle);
  });
  return {
    client,
    health,
    close: async () => {
      client.disconnect();
    },
  };
}
