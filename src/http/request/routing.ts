import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import { ApiError, sendError } from './errors.js';

const METHODS: readonly HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/**
 * Unknown path → 404 `not_found`; known path with a method it does not have → 405 with `Allow`
 * (RFC 9110 §15.5.6). Fastify answers both with 404, so a second router, fed with every route as it is
 * registered, tells the two apart. Must be installed before the routes.
 */
export const routeFallbacks = fp(
  async (app: FastifyInstance) => {
    const known = FindMyWay();
    app.addHook('onRoute', (route) => {
      // A catch-all (the CORS preflight route, `OPTIONS *`) says nothing about which resources exist.
      if (route.url.includes('*')) return;
      for (const method of [route.method].flat() as HTTPMethod[]) {
        if (!known.hasRoute(method, route.url)) known.on(method, route.url, () => {});
      }
    });
    app.setNotFoundHandler((request, reply) => {
      const path = request.url.split('?', 1)[0] as string;
      const allowed = METHODS.filter((method) => known.find(method, path) !== null);
      if (allowed.length === 0)
        return sendError(reply, new ApiError('not_found', 'no resource at this address'));
      return sendError(
        reply,
        new ApiError(
          'method_not_allowed',
          `${request.method} is not allowed here; use ${allowed.join(', ')}`,
          {
            Allow: allowed.join(', '),
          },
        ),
      );
    });
  },
  { name: 'route-fallbacks', fastify: '5.x' },
);
