import {
  type BucketDecision,
  type BucketState,
  describeBucket,
  isFullAgain,
  type TokenBucketPolicy,
  type TokenBuckets,
  takeToken,
} from '../domain/token-bucket.js';

/**
 * Buckets in this process's memory: each node enforces its own budget. A bucket that has refilled to
 * full holds no information, so it is dropped; the map only holds keys active in the last window.
 */
export class MemoryBuckets implements TokenBuckets {
  readonly #buckets = new Map<string, BucketState>();
  readonly #now: () => number;
  #lastSweepMs = 0;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  async take(key: string, policy: TokenBucketPolicy): Promise<BucketDecision> {
    const nowMs = this.#now();
    this.#sweep(nowMs, policy);
    const { state, allowed } = takeToken(this.#buckets.get(key), nowMs, policy);
    this.#buckets.set(key, state);
    return describeBucket(allowed, state.tokens, policy);
  }

  async close(): Promise<void> {
    this.#buckets.clear();
  }

  /** At most once a second: forgets buckets that are full again by now. */
  #sweep(nowMs: number, policy: TokenBucketPolicy): void {
    if (nowMs - this.#lastSweepMs < 1000) return;
    this.#lastSweepMs = nowMs;
    for (const [key, state] of this.#buckets) {
      if (isFullAgain(state, nowMs, policy)) this.#buckets.delete(key);
    }
  }
}
