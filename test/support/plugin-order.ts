import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/**
 * Whether a plugin that names `name` among its dependencies registers on `app` (Fastify refuses it at
 * ready when no plugin of that name came before). Readies `app`.
 */
export async function registersAfter(app: FastifyInstance, name: string): Promise<boolean> {
  let registered = false;
  app.register(
    fp(
      async () => {
        registered = true;
      },
      { name: 'after-it', dependencies: [name] },
    ),
  );
  await app.ready();
  return registered;
}
