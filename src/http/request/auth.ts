import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import type { ApiKeyScope, ApiKeyVerifier, Caller } from '../../domain/api-keys.js';
import { documentOnEveryRoute, errorResponse } from '../schemas/responses.js';
import type { AuthFailureLimiter } from './auth-failures.js';
import { ApiError } from './errors.js';
import { isRepeated } from './request-head.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** SHA-256 of the caller's API key, set once authenticated; never the key itself. */
    apiKeyHash: string;
    /** The id of the caller's API key (Caller.apiKeyId), set once authenticated; '' before. */
    apiKeyId: string;
    /** What the caller's key may do, set once authenticated (scopes.ts checks it). */
    apiKeyScopes: readonly ApiKeyScope[];
  }
}

const REALM = 'Bearer realm="animal-store"';
// RFC 6750 §2.1: the scheme is case-insensitive; the token is a b64token.
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
const BEARER_SCHEME = /^bearer(\s|$)/i;

function unauthorized(tokenSent: boolean): ApiError {
  return tokenSent
    ? new ApiError('unauthorized', 'the API key is not valid', {
        'WWW-Authenticate': `${REALM}, error="invalid_token"`,
      })
    : new ApiError('unauthorized', 'an API key is required: send "Authorization: Bearer <key>"', {
        'WWW-Authenticate': REALM,
      });
}

function tooManyFailures(retryAfterSeconds: number): ApiError {
  return new ApiError(
    'rate_limited',
    `too many failed authentications from this address; retry after ${retryAfterSeconds} s`,
    { 'Retry-After': String(retryAfterSeconds) },
  );
}

/** How every /v1 operation documents its 401, with a message the service really sends. */
const unauthorizedAnswer = errorResponse(
  'Missing or invalid API key',
  { unauthorized: 'an API key is required: send "Authorization: Bearer <key>"' },
  {
    'WWW-Authenticate': Type.String({
      description:
        'Bearer realm="animal-store", with error="invalid_token" when a key was sent (an unknown, revoked or expired key).',
    }),
  },
);

export interface AuthenticationOptions {
  verifier: ApiKeyVerifier;
  /** Refuses an address after too many failures; undefined when AUTH_FAILURES_PER_MINUTE is 0. */
  failures: AuthFailureLimiter | undefined;
}

/**
 * Guards every route registered after it in its encapsulation context (/v1). It runs at onRequest, before the body
 * is read or anything validated, so an anonymous caller learns nothing about the request's shape. An
 * address (the client's, or behind TRUSTED_PROXIES the one they vouch for) whose keys failed too often
 * is refused (429) unless it sends a live key, which is told without a lookup per request
 * (ApiKeyVerifier.isLiveKey); a request with no key at all is never counted.
 */
export const authentication = fp(
  async (app: FastifyInstance, { verifier, failures }: AuthenticationOptions) => {
    documentOnEveryRoute(app, { 401: unauthorizedAnswer });
    app.decorateRequest('apiKeyHash', '');
    app.decorateRequest('apiKeyId', '');
    app.decorateRequest('apiKeyScopes', null as unknown as readonly ApiKeyScope[]);
    app.addHook('onRequest', (request, _reply, done) => {
      const header = request.headers.authorization;
      // No key at all costs nothing to refuse and guesses nothing: it is never counted, so anonymous
      // requests cannot lock out the keys used from the same address (a NAT, a proxy).
      if (header === undefined) return done(unauthorized(false));
      // request.ip runs proxy-addr over X-Forwarded-For behind TRUSTED_PROXIES: worked out once, if needed.
      const address = failures ? request.ip : '';
      const retryAfter = failures ? failures.retryAfterSeconds(address) : 0;
      const refuse = (tokenSent: boolean) => {
        failures?.failed(address);
        done(unauthorized(tokenSent));
      };
      const match = isRepeated(request.raw.rawHeaders, 'authorization') ? null : BEARER.exec(header);
      if (!match)
        return retryAfter > 0 ? done(tooManyFailures(retryAfter)) : refuse(BEARER_SCHEME.test(header));
      const token = match[1] as string;
      const admit = (caller: Caller | undefined) => {
        if (caller === undefined) return refuse(true);
        request.apiKeyHash = caller.apiKeyHash;
        request.apiKeyId = caller.apiKeyId;
        request.apiKeyScopes = caller.scopes;
        done();
      };
      // A callback hook, and a promise only when the key must be looked up: see authenticate.
      const authenticate = () => {
        const verdict = verifier.authenticate(token);
        if (verdict instanceof Promise) verdict.then(admit, done);
        else admit(verdict);
      };
      if (retryAfter === 0) return authenticate();
      // The address failed too often: only a live key gets past it, and telling one costs no lookup.
      const limited = (live: boolean) => (live ? authenticate() : done(tooManyFailures(retryAfter)));
      const live = verifier.isLiveKey(token);
      if (live instanceof Promise) live.then(limited, done);
      else limited(live);
    });
  },
  // After shed-load: an overloaded node refuses before a key costs a lookup.
  { name: 'authentication', fastify: '5.x', dependencies: ['error-handling', 'shed-load'] },
);
