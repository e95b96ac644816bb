import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import type { Storage } from '../../domain/storage.js';
import { unavailable } from '../errors.js';
import { errorResponse, response } from '../schemas/responses.js';

/** A probe that waits longer than a load balancer's own probe timeout (often 1 to 2 s) says nothing. */
const READY_TIMEOUT_MS = 1_000;

/** `work`, or a rejection once `ms` have passed: the work itself goes on, bounded by its own timeouts. */
function withinDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

/** The probes' body; `example` is what the probe answers when all is well. */
const Status = (example: string) =>
  Type.Object({ status: Type.String() }, { additionalProperties: false, examples: [{ status: example }] });
const NO_DATABASE = 'the database cannot read or write now';

/** Probes for a load balancer or orchestrator; outside /v1 and without a key. */
const routes: FastifyPluginAsync<{ storage: Storage }> = async (app, { storage }) => {
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'health',
        summary: 'Liveness: the process is up',
        tags: ['operations'],
        security: [],
        servers: [{ url: '/', description: 'Outside /v1' }],
        response: { 200: response('The process is up', Status('ok')) },
      },
    },
    async () => ({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'ready',
        summary: 'Readiness: the database answers',
        tags: ['operations'],
        security: [],
        servers: [{ url: '/', description: 'Outside /v1' }],
        response: {
          200: response('Ready to serve: the database took a write within a second', Status('ready')),
          503: errorResponse(
            'The database cannot read or write now, or did not answer within a second',
            { unavailable: NO_DATABASE },
            { 'Retry-After': Type.String({ description: 'Seconds to wait before asking again.' }) },
          ),
        },
      },
    },
    async (request) => {
      try {
        await withinDeadline(storage.ping(), READY_TIMEOUT_MS);
      } catch (error) {
        request.log.warn({ reason: (error as Error).message }, 'readiness check failed');
        throw unavailable(NO_DATABASE);
      }
      return { status: 'ready' };
    },
  );
};

export const healthRoutes = fp(routes, {
  name: 'health-routes',
  fastify: '5.x',
  dependencies: ['route-fallbacks', 'openapi'],
});
