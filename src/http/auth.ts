import type { FastifyInstance } from 'fastify';
import type { ApiKeyVerifier } from '../domain/api-keys.js';
import { ApiError } from './errors.js';
import { isRepeated } from './request-head.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** SHA-256 of the caller's API key, set once authenticated; never the key itself. */
    apiKeyHash: string;
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

/**
 * Guards every route registered in this encapsulation context. It runs at onRequest, before the body
 * is read or anything validated, so an anonymous caller learns nothing about the request's shape.
 */
export function requireApiKey(app: FastifyInstance, verifier: ApiKeyVerifier): void {
  app.decorateRequest('apiKeyHash', '');
  app.addHook('onRequest', (request, _reply, done) => {
    const header = request.headers.authorization;
    if (header === undefined) return done(unauthorized(false));
    if (isRepeated(request.raw.rawHeaders, 'authorization')) return done(unauthorized(true));
    const match = BEARER.exec(header);
    if (!match) return done(unauthorized(BEARER_SCHEME.test(header)));
    const admit = (apiKeyHash: string | undefined) => {
      if (apiKeyHash === undefined) return done(unauthorized(true));
      request.apiKeyHash = apiKeyHash;
      done();
    };
    // A callback hook, and a promise only when the key must be looked up: see authenticate.
    const verdict = verifier.authenticate(match[1] as string);
    if (verdict instanceof Promise) verdict.then(admit, done);
    else admit(verdict);
  });
}
