import type { Redis } from 'ioredis';
import type { RedisHealth } from '../../redis.js';

/**
 * Where each API key's last write stands in the primary's WAL: a replica serves the key's reads only
 * once it has replayed that far (read-your-writes). Positions expire: once a write is older than
 * `ttlMs`, every replica still in use (within the lag bound, far shorter) has replayed it.
 */
export interface WritePositions {
  /** Records that `key` wrote up to `lsn` (a smaller position never replaces a larger one). */
  record(key: string, lsn: bigint): Promise<void>;
  /** The key's last recorded position; undefined when it has none; UNKNOWN_POSITION when it cannot tell. */
  get(key: string): Promise<bigint | undefined>;
  close(): Promise<void>;
}

/** A position no replica reaches: what a lookup that failed answers, so the read goes to the primary. */
export const UNKNOWN_POSITION = (1n << 64n) - 1n;

/** Positions kept in this process: one node's keys only (REDIS_URL shares them between nodes). */
export class MemoryWritePositions implements WritePositions {
  readonly #positions = new Map<string, { lsn: bigint; until: number }>();
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(ttlMs: number, now: () => number = Date.now) {
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  async record(key: string, lsn: bigint): Promise<void> {
    const now = this.#now();
    const current = this.#positions.get(key);
    // Re-inserted so the map stays in order of last write: expired entries are at its front.
    this.#positions.delete(key);
    this.#positions.set(key, {
      lsn: current && current.until > now && current.lsn > lsn ? current.lsn : lsn,
      until: now + this.#ttlMs,
    });
    for (const [oldest, { until }] of this.#positions) {
      if (until > now) break;
      this.#positions.delete(oldest);
    }
  }

  async get(key: string): Promise<bigint | undefined> {
    const position = this.#positions.get(key);
    return position && position.until > this.#now() ? position.lsn : undefined;
  }

  async close(): Promise<void> {}
}

/**
 * Keeps the larger of the stored and the given position, in one step whatever the number of nodes:
 * positions are 16 hexadecimal digits, so comparing the strings compares the positions.
 */
const RECORD_MAX = `
local current = redis.call('GET', KEYS[1])
if (not current) or current < ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
`;

type RecordMaxCommand = (key: string, lsn: string, ttlMs: number) => Promise<number>;

/**
 * Positions shared by every node through Redis (REDIS_URL), so a key that writes through one node and
 * reads through another still reads its write. Keys are prefixed with the primary's system identifier:
 * two clusters sharing one Redis never read each other's positions. On the service's one connection
 * (redis.ts), whose commands fail fast: a lookup that fails sends the read to the primary. Failures are
 * told to the connection's health (counted, an outage logged once).
 */
export class RedisWritePositions implements WritePositions {
  readonly #redis: Redis;
  readonly #recordMax: RecordMaxCommand;
  readonly #prefix: string;
  readonly #ttlMs: number;
  readonly #health: Pick<RedisHealth, 'failed' | 'succeeded'>;
  /** This node's own writes too: a position Redis failed to take still holds on the node that wrote. */
  readonly #local: MemoryWritePositions;

  constructor(
    redis: Redis,
    prefix: string,
    ttlMs: number,
    health: Pick<RedisHealth, 'failed' | 'succeeded'>,
  ) {
    this.#redis = redis;
    this.#local = new MemoryWritePositions(ttlMs);
    this.#prefix = prefix;
    this.#ttlMs = ttlMs;
    this.#health = health;
    redis.defineCommand('petstoreRecordWritePosition', { numberOfKeys: 1, lua: RECORD_MAX });
    this.#recordMax = (
      redis as unknown as { petstoreRecordWritePosition: RecordMaxCommand }
    ).petstoreRecordWritePosition.bind(redis);
  }

  async record(key: string, lsn: bigint): Promise<void> {
    await this.#local.record(key, lsn);
    try {
      await this.#recordMax(this.#prefix + key, lsn.toString(16).padStart(16, '0'), this.#ttlMs);
      this.#health.succeeded('write_positions');
    } catch (error) {
      // The write itself committed: it is not failed for this. Other nodes may then serve this key
      // from a replica that has not replayed it yet, until the replica catches up (within the bound).
      this.#health.failed('write_positions', error);
    }
  }

  async get(key: string): Promise<bigint | undefined> {
    try {
      const value = await this.#redis.get(this.#prefix + key);
      const local = await this.#local.get(key);
      const shared = value === null ? undefined : BigInt(`0x${value}`);
      this.#health.succeeded('write_positions');
      return local === undefined || (shared !== undefined && shared > local) ? shared : local;
    } catch (error) {
      this.#health.failed('write_positions', error);
      return UNKNOWN_POSITION;
    }
  }

  /** The connection is the service's (redis.ts), closed by whoever opened it. */
  async close(): Promise<void> {}
}
