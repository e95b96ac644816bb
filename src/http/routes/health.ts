import type { FastifyPluginAsync } from 'fastify';
import { Type } from 'typebox';
import type { Storage } from '../../storage/storage.js';
import { ApiError } from '../errors.js';
import { errorResponse, response } from '../schemas/responses.js';

/** The probes' body; `example` is what the probe answers when all is well. */
const Status = (example: string) =>
  Type.Object({ status: Type.String() }, { additionalProperties: false, examples: [{ status: example }] });
const NO_DATABASE = 'the database does not answer';

/** Probes for a load balancer or orchestrator; outside /v1 and without a key. */
export const healthRoutes: FastifyPluginAsync<{ storage: Storage }> = async (app, { storage }) => {
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
          200: response('Ready to serve', Status('ready')),
          503: errorResponse('The database does not answer', { unavailable: NO_DATABASE }),
        },
      },
    },
    async (request) => {
      try {
        await storage.ping();
      } catch (error) {
        request.log.warn({ err: error }, 'readiness check failed');
        throw new ApiError('unavailable', NO_DATABASE);
      }
      return { status: 'ready' };
    },
  );
};
