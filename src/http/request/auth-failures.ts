import {
  type BucketState,
  describeBucket,
  isFullAgain,
  type TokenBucketPolicy,
  takeToken,
} from '../../domain/token-bucket.js';

/** Beyond this many addresses tracked at once the memory starts over: bounded whatever callers send. */
const ADDRESS_LIMIT = 100_000;

/**
 * Failed authentications per client address, as a token bucket in this process's memory: an address
 * that runs its bucket dry is refused (429) until it may try again, before its key is even looked at,
 * so guessing keys or flooding with a bad one costs no database query. Synchronous: on the path of
 * every authenticated request.
 */
export class AuthFailureLimiter {
  readonly #policy: TokenBucketPolicy;
  readonly #now: () => number;
  readonly #buckets = new Map<string, BucketState>();
  /** Addresses refused, with the instant they may try again. */
  readonly #blocked = new Map<string, number>();
  #lastSweepMs = 0;

  constructor(policy: TokenBucketPolicy, now: () => number = Date.now) {
    this.#policy = policy;
    this.#now = now;
  }

  /** Whole seconds until `address` may try again; 0 when it may now. */
  retryAfterSeconds(address: string): number {
    const until = this.#blocked.get(address);
    if (until === undefined) return 0;
    const left = until - this.#now();
    if (left > 0) return Math.ceil(left / 1000);
    this.#blocked.delete(address);
    return 0;
  }

  /** Counts a failed authentication from `address`. */
  failed(address: string): void {
    const nowMs = this.#now();
    this.#sweep(nowMs);
    const { state } = takeToken(this.#buckets.get(address), nowMs, this.#policy);
    this.#buckets.set(address, state);
    // The bucket is empty: the next attempt would be one too many, so it is refused before it is made.
    if (state.tokens < 1) {
      const { retryAfterSeconds } = describeBucket(false, state.tokens, this.#policy);
      this.#blocked.set(address, nowMs + retryAfterSeconds * 1000);
    }
  }

  /** At most once a second: forgets buckets that are full again, and the whole map past its bound. */
  #sweep(nowMs: number): void {
    if (this.#buckets.size >= ADDRESS_LIMIT) {
      this.#buckets.clear();
      this.#blocked.clear();
    }
    if (nowMs - this.#lastSweepMs < 1000) return;
    this.#lastSweepMs = nowMs;
    for (const [address, state] of this.#buckets) {
      if (isFullAgain(state, nowMs, this.#policy)) this.#buckets.delete(address);
    }
  }
}
