/**
 * Per-key rate limiting as a token bucket: a key may send `burst` requests at once, then `perSecond`
 * requests a second on average. Pure arithmetic on a bucket's state, so the in-memory buckets and any
 * shared store (Redis runs the same steps in a Lua script) agree on every answer.
 */
export interface TokenBucketPolicy {
  /** Tokens added per second (the sustained rate). */
  perSecond: number;
  /** The bucket's size: requests that may arrive at once. */
  burst: number;
}

export interface BucketState {
  /** Tokens left, fractional: refills accrue continuously. */
  tokens: number;
  /** When `tokens` was last brought up to date, in milliseconds. */
  atMs: number;
}

export interface BucketDecision {
  allowed: boolean;
  /** Whole requests that may still be sent right now. */
  remaining: number;
  /** Seconds, rounded up, until one more request is allowed (0 while some remain). */
  retryAfterSeconds: number;
  /** Seconds, rounded up, until the bucket is full again: the quota's reset in the IETF draft's sense. */
  resetSeconds: number;
}

/** Refills the bucket up to `nowMs`, then takes one token if there is one. */
export function takeToken(
  state: BucketState | undefined,
  nowMs: number,
  policy: TokenBucketPolicy,
): { state: BucketState; allowed: boolean } {
  const taken = takeTokens(state, nowMs, policy, 1);
  return { state: taken.state, allowed: taken.taken === 1 };
}

/** Refills the bucket up to `nowMs`, then takes as many whole tokens as it holds, `wanted` at most. */
export function takeTokens(
  state: BucketState | undefined,
  nowMs: number,
  policy: TokenBucketPolicy,
  wanted: number,
): { state: BucketState; taken: number } {
  const elapsedMs = state ? Math.max(0, nowMs - state.atMs) : 0;
  const tokens = state
    ? Math.min(policy.burst, state.tokens + (elapsedMs * policy.perSecond) / 1000)
    : policy.burst;
  const taken = Math.max(0, Math.min(wanted, Math.floor(tokens)));
  // The time never moves back: a bucket shared by processes may be taken from with a `nowMs` read a
  // moment before another's take, and moving back would refill that moment again at the next take.
  return { state: { tokens: tokens - taken, atMs: state ? Math.max(nowMs, state.atMs) : nowMs }, taken };
}

/** When the bucket next holds a whole token, in milliseconds: `state.atMs` when it holds one already. */
export const nextTokenAtMs = (state: BucketState, policy: TokenBucketPolicy): number =>
  state.atMs + (Math.max(0, 1 - state.tokens) * 1000) / policy.perSecond;

/** Whether the bucket has refilled to full by `nowMs`: it then holds no information and may be forgotten. */
export const isFullAgain = (state: BucketState, nowMs: number, policy: TokenBucketPolicy): boolean =>
  state.tokens + ((nowMs - state.atMs) * policy.perSecond) / 1000 >= policy.burst;

/** What a client is told after a take that left `tokens` in the bucket. */
export function describeBucket(allowed: boolean, tokens: number, policy: TokenBucketPolicy): BucketDecision {
  const secondsFor = (missing: number) => Math.max(0, Math.ceil(missing / policy.perSecond));
  return {
    allowed,
    remaining: Math.floor(tokens),
    retryAfterSeconds: tokens >= 1 ? 0 : Math.max(1, secondsFor(1 - tokens)),
    resetSeconds: secondsFor(policy.burst - tokens),
  };
}

/** Whole seconds in which an empty bucket fills up: the window of the advertised quota. */
export const windowSeconds = (policy: TokenBucketPolicy): number =>
  Math.max(1, Math.ceil(policy.burst / policy.perSecond));

/** Where buckets live: this process's memory, or a store shared by every node. */
export interface TokenBuckets {
  take(key: string, policy: TokenBucketPolicy): Promise<BucketDecision>;
  close(): Promise<void>;
}
