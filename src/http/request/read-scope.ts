import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { runInReadScope } from '../../storage/postgres/read-scope.js';

/**
 * Opens the caller's read scope (src/storage/postgres/read-scope.ts) around each /v1 handler: its key, for
 * read-your-writes, and whether its reads may be served by a replica (GET and HEAD only; a write's own
 * reads stay on the primary). At preHandler, not onRequest: the handler runs synchronously inside this
 * hook's callback, so the scope reaches it and everything it awaits, whereas a request body is read
 * from socket events that would have left an earlier scope behind.
 */
export const readScope = fp(
  async (app: FastifyInstance) => {
    app.addHook('preHandler', (request, _reply, done) => {
      const method = request.raw.method;
      runInReadScope({ key: request.apiKeyHash, replicaReads: method === 'GET' || method === 'HEAD' }, done);
    });
  },
  { name: 'read-scope', fastify: '5.x', dependencies: ['authentication'] },
);

/**
 * Runs `read` as a read anyone may be served from a fresh replica (no key's writes to wait for):
 * the pages a live stream catches up by, which end on the primary all the same (LiveEvents).
 */
export function readFromReplica<T>(read: () => T): T {
  return runInReadScope({ key: '', replicaReads: true }, read);
}
