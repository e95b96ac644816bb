/**
 * The framework's floor: Fastify, configured as the service configures it but with nothing of the
 * service (no logger, hooks, auth, validation or database), answering the same URLs with the same
 * fixed bytes as the reference. The gap between it and the reference is what Fastify itself costs on
 * this machine; the gap between the service and it is what the service's own work costs.
 *
 *   tsx bench/fastify-floor.ts <port>
 */
import Fastify from 'fastify';
import { createdHeaders, one, oneHeaders, page, pageHeaders } from './fixed-responses.js';

const port = Number(process.argv[2]);
const app = Fastify({ logger: false });

app.get('/v1/pets', (_request, reply) => {
  reply.headers(pageHeaders).send(page);
});
app.get('/v1/pets/:petId', (_request, reply) => {
  reply.headers(oneHeaders).send(one);
});
// The body is read and parsed as JSON (Fastify's default parser), as the service must.
app.post('/v1/pets', (_request, reply) => {
  reply.code(201).headers(createdHeaders).send(one);
});
// The Store's URLs (place-order, list-orders), with the same fixed bytes as the reference answers them.
app.get('/v1/store/orders', (_request, reply) => {
  reply.headers(pageHeaders).send(page);
});
app.post('/v1/store/orders', (_request, reply) => {
  reply.code(201).headers(createdHeaders).send(one);
});

await app.listen({ port, host: '127.0.0.1' });
// Ended by the tools with SIGTERM: exit, rather than die of it, so `--cpu-prof` writes its profile.
process.once('SIGTERM', () => process.exit(0));
