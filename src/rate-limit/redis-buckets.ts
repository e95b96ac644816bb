import type { Redis } from 'ioredis';
import {
  type BucketDecision,
  describeBucket,
  type TokenBucketPolicy,
  type TokenBuckets,
} from '../domain/token-bucket.js';

/**
 * takeToken (src/domain/token-bucket.ts) as one Lua script, so the read-refill-take-write of a bucket
 * is atomic however many nodes share it. The clock is Redis's own (TIME), so nodes whose clocks
 * disagree still agree on every bucket. Idle buckets expire once they would be full again.
 */
const TAKE_TOKEN = `
local per_second = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at_ms')
local tokens = burst
if state[1] then
  local elapsed_ms = math.max(0, now_ms - tonumber(state[2]))
  tokens = math.min(burst, tonumber(state[1]) + elapsed_ms * per_second / 1000)
end
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at_ms', tostring(now_ms))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / per_second) + 1000)
return {allowed, tostring(tokens)}
`;

type TakeTokenCommand = (key: string, perSecond: number, burst: number) => Promise<[number, string]>;

/**
 * Buckets shared by every node through Redis (REDIS_URL): N nodes enforce one budget per key. On the
 * service's one connection (redis.ts), whose commands never wait long: a limiter must never be what
 * makes a request slow (a failed take fails open, rate-limit.ts).
 */
export class RedisBuckets implements TokenBuckets {
  readonly #takeToken: TakeTokenCommand;

  constructor(redis: Redis) {
    redis.defineCommand('petstoreTakeToken', { numberOfKeys: 1, lua: TAKE_TOKEN });
    const command = (redis as unknown as { petstoreTakeToken: TakeTokenCommand }).petstoreTakeToken;
    this.#takeToken = command.bind(redis);
  }

  async take(key: string, policy: TokenBucketPolicy): Promise<BucketDecision> {
    const [allowed, tokens] = await this.#takeToken(`petstore:rate:${key}`, policy.perSecond, policy.burst);
    return describeBucket(allowed === 1, Number(tokens), policy);
  }

  /** The connection is the service's (redis.ts), closed by whoever opened it. */
  async close(): Promise<void> {}
}
