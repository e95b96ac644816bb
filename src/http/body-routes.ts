import type { FastifyInstance, preParsingHookHandler } from 'fastify';

/** Methods whose body Fastify reads (its `bodywith` list); no other request's body is ever parsed. */
export const BODY_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Adds `hook` to the preParsing hooks of each route registered from now on whose method may carry a
 * body. A GET or HEAD (most of the traffic) runs none: what they check is about a body that is never read.
 * Unknown paths and methods (404, 405) run none either: their body is not read.
 */
export function preParsingOnBodyRoutes(app: FastifyInstance, hook: preParsingHookHandler): void {
  app.addHook('onRoute', (route) => {
    if (![route.method].flat().some((method) => BODY_METHODS.has(method))) return;
    route.preParsing = [...[route.preParsing ?? []].flat(), hook];
  });
}
