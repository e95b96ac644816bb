import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { GuardedServer } from './connections.js';

/**
 * Graceful shutdown at the HTTP level (GuardedServer does the connection side). While the server
 * drains, a client may still have a keep-alive connection open, with a request in flight or about to
 * be sent. Those requests are served as usual, and every response then says `Connection: close`, so
 * each connection ends after its answer instead of holding the process open until its keep-alive
 * timeout. (Fastify's return503OnClosing is off: it would answer them with a body that is not our Error.)
 * An answer sent before its request's body was read says `Connection: close` too.
 */
export const draining = fp(
  async (app: FastifyInstance) => {
    const server = app.server as GuardedServer;
    app.addHook('onSend', (request, reply, payload, done) => {
      // An answer given before its request's body arrived (a 401 or 403 at once, a 413 past the limit):
      // the rest of the body is nobody's, so the connection ends and lingers (GuardedServer), bounded,
      // rather than reading it to the end for a next request, which a client that never stops sending
      // made last until the request timeout.
      if (server.draining || bodyStillArriving(request.raw)) reply.header('Connection', 'close');
      done(null, payload);
    });
  },
  { name: 'draining', fastify: '5.x' },
);

/**
 * Whether a request has a body that has not all arrived. Only a request with a body: the `complete`
 * of a body-less one may not be set yet while its connection waits with others pipelined behind it.
 */
function bodyStillArriving(request: IncomingMessage): boolean {
  const { headers } = request;
  const hasBody =
    headers['transfer-encoding'] !== undefined ||
    (headers['content-length'] !== undefined && headers['content-length'] !== '0');
  return hasBody && !request.complete;
}
