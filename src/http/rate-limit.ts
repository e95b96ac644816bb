import type { FastifyInstance } from 'fastify';
import { type TokenBucketPolicy, type TokenBuckets, windowSeconds } from '../domain/token-bucket.js';
import { ApiError } from './errors.js';
import type { ServiceMetrics } from './metrics.js';

export interface RateLimitOptions {
  buckets: TokenBuckets;
  policy: TokenBucketPolicy;
  metrics: ServiceMetrics;
}

/** The quota policy's name in the RateLimit-Policy and RateLimit fields. */
const POLICY = '"per-key"';

/**
 * Limits each API key to its token bucket. Registered after requireApiKey in the same context, so it
 * runs once the caller is known, and an anonymous flood is refused by authentication without touching
 * any bucket. Every limited-or-not response carries the IETF draft's fields
 * (draft-ietf-httpapi-ratelimit-headers, structured-field form): RateLimit-Policy states the quota
 * (q requests, refilled over w seconds) and RateLimit what is left now (r) and the seconds until the
 * bucket is full again (t). A refused request also gets Retry-After: when one more request may pass.
 */
export function limitRequestRate(app: FastifyInstance, { buckets, policy, metrics }: RateLimitOptions): void {
  const policyField = `${POLICY};q=${policy.burst};w=${windowSeconds(policy)}`;
  let failingOpen = false;

  app.addHook('onRequest', async (request, reply) => {
    let decision: Awaited<ReturnType<TokenBuckets['take']>>;
    try {
      decision = await buckets.take(request.apiKeyHash, policy);
    } catch (error) {
      // Fail open: a broken limiter must not take the API down with it. Counted on every request,
      // logged once per outage so a Redis that stays away does not flood the logs.
      metrics.rateLimitFailOpen.inc();
      if (!failingOpen) request.log.warn({ err: error }, 'rate limiter unavailable: requests pass unlimited');
      failingOpen = true;
      return;
    }
    if (failingOpen) request.log.info('rate limiter available again');
    failingOpen = false;

    const fields = {
      'RateLimit-Policy': policyField,
      RateLimit: `${POLICY};r=${decision.remaining};t=${decision.resetSeconds}`,
    };
    if (!decision.allowed) {
      throw new ApiError(
        'rate_limited',
        `too many requests for this API key: at most ${policy.burst} at once and ${policy.perSecond} per second`,
        { ...fields, 'Retry-After': String(decision.retryAfterSeconds) },
      );
    }
    reply.headers(fields);
  });
}
