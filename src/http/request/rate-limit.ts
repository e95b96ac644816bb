import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import { type TokenBucketPolicy, type TokenBuckets, windowSeconds } from '../../domain/token-bucket.js';
import type { ServiceMetrics } from '../observability/metrics.js';
import { documentOnEveryRoute, errorResponse, RetryAfterHeader } from '../schemas/responses.js';
import { ApiError } from './errors.js';

export interface RateLimitOptions {
  /** Where the buckets live; undefined when limiting is off (RATE_LIMIT_PER_SECOND=0). */
  buckets: TokenBuckets | undefined;
  policy: TokenBucketPolicy;
  metrics: ServiceMetrics;
}

/** The quota policy's name in the RateLimit-Policy and RateLimit fields. */
const POLICY = '"per-key"';

/**
 * How every /v1 operation documents its 429: from this hook, and from the failed-authentication limit
 * (auth.ts), which this describes too. Documented even where limiting is off, like the contract it is.
 */
const rateLimitedAnswer = errorResponse(
  'Too many requests for this API key: its token bucket is empty. Every `/v1` response of an authenticated ' +
    'request carries `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers). Also given, ' +
    'with `Retry-After` only, to a client address with too many failed authentications, before its key is looked at',
  { rate_limited: 'too many requests for this API key: at most 200 at once and 100 per second' },
  {
    'Retry-After': RetryAfterHeader,
    'RateLimit-Policy': Type.String({
      description: '`"per-key";q=<burst>;w=<seconds for an empty bucket to refill>`.',
    }),
    RateLimit: Type.String({
      description: '`"per-key";r=<requests left now>;t=<seconds until the bucket is full again>`.',
    }),
  },
);

/**
 * Limits each API key to its token bucket. Registered after authentication in the same context, so it
 * runs once the caller is known, and an anonymous flood is refused by authentication without touching
 * any bucket. Every limited-or-not response carries the IETF draft's fields
 * (draft-ietf-httpapi-ratelimit-headers, structured-field form): RateLimit-Policy states the quota
 * (q requests, refilled over w seconds) and RateLimit what is left now (r) and the seconds until the
 * bucket is full again (t). A refused request also gets Retry-After: when one more request may pass.
 */
export const rateLimit = fp(
  async (app: FastifyInstance, { buckets, policy, metrics }: RateLimitOptions) => {
    documentOnEveryRoute(app, { 429: rateLimitedAnswer });
    if (!buckets) return;
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
        if (!failingOpen)
          request.log.warn({ err: error }, 'rate limiter unavailable: requests pass unlimited');
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
  },
  { name: 'rate-limit', fastify: '5.x', dependencies: ['authentication'] },
);
