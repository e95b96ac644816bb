import type { FastifyInstance } from 'fastify';

/**
 * Graceful shutdown at the HTTP level. Once close begins, the server accepts no new connections, but a
 * client may still have a keep-alive connection open, with a request in flight or about to be sent.
 * Those requests are served as usual, and every response then says `Connection: close`, so each
 * connection ends after its answer instead of holding the process open until its keep-alive timeout.
 * (Fastify's return503OnClosing is off: it would answer them with a body that is not our Error.)
 */
export function installDraining(app: FastifyInstance): void {
  let draining = false;
  app.addHook('preClose', (done) => {
    draining = true;
    done();
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (draining) reply.header('Connection', 'close');
    done(null, payload);
  });
}
