import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import type { ApiKeyScope } from '../../domain/api-keys.js';
import { errorResponse } from '../schemas/responses.js';
import { ApiError } from './errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The scope a /v1 operation needs (docs/api.md: GET needs its group's `:read`, the others its
     * `:write`), declared once beside the route: the check, the security requirement and the 403 of the
     * OpenAPI document all come from it.
     */
    scope?: ApiKeyScope;
  }
}

/** The name of the bearer security scheme in the OpenAPI document (openapi.ts). */
const SECURITY_SCHEME = 'bearerAuth';

const insufficientScopeMessage = (scope: ApiKeyScope) =>
  `this API key does not have the scope ${scope}, which this operation needs`;

/** RFC 6750 §3.1: the challenge names the error and the scope that would have done. */
function insufficientScope(scope: ApiKeyScope): ApiError {
  return new ApiError('forbidden', insufficientScopeMessage(scope), {
    'WWW-Authenticate': `Bearer realm="animal-store", error="insufficient_scope", scope="${scope}"`,
  });
}

const forbiddenAnswer = (scope: ApiKeyScope) =>
  errorResponse(
    `The API key is valid but lacks the scope \`${scope}\``,
    { forbidden: insufficientScopeMessage(scope) },
    {
      'WWW-Authenticate': Type.String({
        description: `Bearer realm="animal-store", error="insufficient_scope", scope="${scope}" (RFC 6750 §3.1).`,
      }),
    },
  );

/**
 * Refuses a caller whose key lacks the scope the route declares (`config.scope`), with `403 forbidden`.
 * It runs at onRequest right after authentication, before the body is read or anything validated, so a
 * caller without the scope learns nothing about the request's shape. Every documented route registered
 * after it must declare its scope: one that does not is refused at start, so no operation is left open
 * by omission. The OpenAPI document shows the scope in the operation's security requirement (OpenAPI
 * 3.1 allows role names for any scheme) and description, and documents the 403.
 */
export const scopes = fp(
  async (app: FastifyInstance) => {
    app.addHook('onRoute', (route) => {
      const own = route.schema?.response as Record<string, unknown> | undefined;
      if (!own) return; // an undocumented route (the CORS preflight) stays undocumented
      const scope = route.config?.scope;
      if (scope === undefined) throw new Error(`${route.method} ${route.url} declares no scope`);
      const description = route.schema?.description as string | undefined;
      const needs = `Needs an API key with the scope \`${scope}\`; without it, \`403 forbidden\`.`;
      route.schema = {
        ...route.schema,
        description: description ? `${description}\n\n${needs}` : needs,
        security: [{ [SECURITY_SCHEME]: [scope] }],
        response: { ...own, 403: forbiddenAnswer(scope) },
      };
    });
    app.addHook('onRequest', (request, _reply, done) => {
      const needed = request.routeOptions.config.scope;
      // No scope: not an operation (an unknown path or method, answered 404 or 405).
      if (needed === undefined || request.apiKeyScopes.includes(needed)) return done();
      done(insufficientScope(needed));
    });
  },
  { name: 'scopes', fastify: '5.x', dependencies: ['authentication'] },
);
