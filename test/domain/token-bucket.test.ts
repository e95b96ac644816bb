import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type BucketState,
  describeBucket,
  isFullAgain,
  nextTokenAtMs,
  takeToken,
  takeTokens,
  windowSeconds,
} from '../../src/domain/token-bucket.js';
import { throttleAfter, throttleAllows } from '../../src/domain/webhooks.js';
import { MemoryBuckets } from '../../src/rate-limit/memory-buckets.js';

const policy = { perSecond: 2, burst: 3 };

test('when a new key sends its burst, then each request passes and the next is refused', () => {
  let state: BucketState | undefined;
  const allowed: boolean[] = [];
  for (let i = 0; i < 4; i++) {
    const taken = takeToken(state, 1_000, policy);
    state = taken.state;
    allowed.push(taken.allowed);
  }
  assert.deepEqual(allowed, [true, true, true, false]);
  assert.equal(state?.tokens, 0);
});

test('when time passes, then tokens come back at the rate and never beyond the burst', () => {
  const empty: BucketState = { tokens: 0, atMs: 0 };
  assert.equal(takeToken(empty, 499, policy).allowed, false, 'less than one token after 499 ms at 2/s');
  assert.equal(takeToken(empty, 500, policy).allowed, true, 'one token after 500 ms');
  assert.equal(takeToken(empty, 60_000, policy).state.tokens, policy.burst - 1, 'capped at the burst');
});

test("when a take comes with a time older than the bucket's (another process read its clock first), then nothing refills, and the bucket's time stays", () => {
  const state: BucketState = { tokens: 1.5, atMs: 1_000 };
  const older = takeTokens(state, 600, policy, 5);
  assert.deepEqual(older, { state: { tokens: 0.5, atMs: 1_000 }, taken: 1 });
  // From 1,000 ms, not 600: 250 ms at 2 a second is half a token, making one.
  assert.equal(takeTokens(older.state, 1_250, policy, 5).taken, 1);
  assert.equal(takeTokens(older.state, 1_249, policy, 5).taken, 0);
});

test('when a bucket is described, then Retry-After is the wait for one token and t the wait until full', () => {
  assert.deepEqual(describeBucket(false, 0.5, policy), {
    allowed: false,
    remaining: 0,
    retryAfterSeconds: 1,
    resetSeconds: 2,
  });
  assert.deepEqual(describeBucket(true, 2, policy), {
    allowed: true,
    remaining: 2,
    retryAfterSeconds: 0,
    resetSeconds: 1,
  });
  assert.equal(windowSeconds(policy), 2);
  assert.equal(windowSeconds({ perSecond: 0.01, burst: 3 }), 300);
});

test('when two keys share the in-memory buckets, then each has a budget of its own', async () => {
  let now = 0;
  const buckets = new MemoryBuckets(() => now);
  for (let i = 0; i < 3; i++) assert.equal((await buckets.take('a', policy)).allowed, true);
  assert.equal((await buckets.take('a', policy)).allowed, false);
  assert.equal((await buckets.take('b', policy)).allowed, true);
  now = 10_000; // long enough for 'a' to refill: it is swept, and starts full again
  assert.equal((await buckets.take('a', policy)).remaining, 2);
});

test('when a bucket refills, then it is full again exactly when its tokens reach the burst, not before', () => {
  const state: BucketState = { tokens: 1, atMs: 10_000 };
  // 2 tokens missing at 2 per second: full 1 s later.
  assert.equal(isFullAgain(state, 10_999, policy), false);
  assert.equal(isFullAgain(state, 11_000, policy), true);
  assert.equal(isFullAgain(state, 12_000, policy), true);
  assert.equal(
    isFullAgain({ tokens: 3, atMs: 10_000 }, 10_000, policy),
    true,
    'a full bucket is full at once',
  );
  assert.equal(isFullAgain({ tokens: 2.5, atMs: 10_000 }, 10_000, { perSecond: 0.5, burst: 3 }), false);
  assert.equal(isFullAgain({ tokens: 2.5, atMs: 10_000 }, 11_000, { perSecond: 0.5, burst: 3 }), true);
});

test('when exactly one token is left, then no wait is asked; when the wait for one is long, then it is all of it', () => {
  assert.equal(describeBucket(true, 1, policy).retryAfterSeconds, 0);
  const slow = { perSecond: 0.25, burst: 2 };
  // 0.75 of a token missing at 0.25 per second: 3 s.
  assert.equal(describeBucket(false, 0.25, slow).retryAfterSeconds, 3);
  assert.equal(describeBucket(false, 0, slow).retryAfterSeconds, 4);
});

test('when a throttled endpoint is claimed from, then a quiet one gives a second’s worth at once, then one per interval, and says when the next is due', () => {
  // 20 a second: a full bucket (never claimed from) gives 20 of the 30 wanted.
  assert.equal(throttleAllows(20, undefined, 1_000, 30), 20);
  const emptied = throttleAfter(20, undefined, 1_000, 20);
  assert.deepEqual(emptied.bucket, { tokens: 0, atMs: 1_000 });
  assert.equal(emptied.nextAt?.getTime(), 1_050, 'the next token 50 ms later');
  assert.equal(throttleAllows(20, emptied.bucket, 1_049, 5), 0);
  assert.equal(throttleAllows(20, emptied.bucket, 1_050, 5), 1);
  assert.equal(throttleAllows(20, emptied.bucket, 1_175, 5), 3, '175 ms: three whole tokens');
  // Leasing fewer than allowed keeps the rest, and a bucket holding a whole token is not waited for.
  const partly = throttleAfter(20, undefined, 1_000, 5);
  assert.deepEqual(partly, { bucket: { tokens: 15, atMs: 1_000 }, nextAt: undefined });
  // Never more than a second's worth, however long it was quiet.
  assert.equal(throttleAllows(20, emptied.bucket, 1_000_000, 100), 20);
  assert.equal(takeTokens({ tokens: 0.5, atMs: 0 }, 0, { perSecond: 2, burst: 2 }, 1).taken, 0);
  assert.equal(nextTokenAtMs({ tokens: 0.5, atMs: 0 }, { perSecond: 2, burst: 2 }), 250);
});
