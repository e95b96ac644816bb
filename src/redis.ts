import type { Redis } from 'ioredis';

/**
 * A connection to REDIS_URL for a part of the service that must never wait on Redis (the shared rate
 * limits, the read replicas' write positions): a command fails at once while Redis is away and after
 * `commandTimeoutMs` when it does not answer, and the caller falls back (fails open, reads from the
 * primary). It reconnects, at most every 2 s, for as long as the service runs.
 *
 * Resolves once Redis answers or the first attempt fails: the first requests then meet a shared state,
 * not a fallback, and a Redis that is down at start does not stop the start. ioredis is loaded only
 * here: it would add about 20 MiB to every process that does not use it.
 */
export async function connectRedis(
  url: string,
  {
    commandTimeoutMs,
    onConnectionError,
  }: { commandTimeoutMs: number; onConnectionError: (error: Error) => void },
): Promise<Redis> {
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, {
    // While disconnected, fail each command at once instead of queueing it behind a reconnect.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    connectTimeout: 1_000,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2_000),
  });
  // Without a listener ioredis reports each failed reconnect as an unhandled 'error' event.
  redis.on('error', onConnectionError);
  await new Promise<void>((resolve) => {
    const settle = () => {
      redis.off('ready', settle).off('error', settle);
      resolve();
    };
    redis.once('ready', settle).once('error', settle);
  });
  return redis;
}
