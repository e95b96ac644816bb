import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import Fastify from 'fastify';
import { authentication } from '../../src/http/auth.js';
import { errorHandling } from '../../src/http/errors.js';
import { shedLoad } from '../../src/http/overload.js';
import { rateLimit } from '../../src/http/rate-limit.js';
import { scopes } from '../../src/http/scopes.js';

/** The order of the HTTP concerns is declared by the plugins themselves, and Fastify holds to it. */
describe('plugin order', () => {
  const overload = { maxEventLoopDelayMs: 1_000, maxHeapUsedBytes: 1e12 };
  const verifier = { authenticate: () => undefined } as never;

  test('when the rate limit is registered before authentication, then Fastify refuses to start, naming both', async () => {
    const app = Fastify();
    await app.register(errorHandling);
    await app.register(shedLoad, { overload });
    await assert.rejects(
      async () => {
        await app.register(rateLimit, {
          buckets: undefined,
          policy: { perSecond: 1, burst: 1 },
          metrics: {} as never,
        });
        await app.ready();
      },
      (error: Error & { code?: string }) =>
        error.code === 'FST_ERR_PLUGIN_DEPENDENCY_NOT_REGISTERED' &&
        /authentication/.test(error.message) &&
        /rate-limit/.test(error.message),
    );
    await app.close().catch(() => undefined);
  });

  test('when authentication is registered before load shedding, then Fastify refuses to start', async () => {
    const app = Fastify();
    await app.register(errorHandling);
    await assert.rejects(
      async () => {
        await app.register(authentication, { verifier, failures: undefined });
        await app.ready();
      },
      (error: Error & { code?: string }) =>
        error.code === 'FST_ERR_PLUGIN_DEPENDENCY_NOT_REGISTERED' && /shed-load/.test(error.message),
    );
    await app.close().catch(() => undefined);
  });

  test('when scopes are registered before authentication, then Fastify refuses to start, naming both', async () => {
    const app = Fastify();
    await app.register(errorHandling);
    await app.register(shedLoad, { overload });
    await assert.rejects(
      async () => {
        await app.register(scopes);
        await app.ready();
      },
      (error: Error & { code?: string }) =>
        error.code === 'FST_ERR_PLUGIN_DEPENDENCY_NOT_REGISTERED' &&
        /authentication/.test(error.message) &&
        /scopes/.test(error.message),
    );
    await app.close().catch(() => undefined);
  });

  test('when a documented operation declares no scope, then the app refuses to start, naming it', async () => {
    const app = Fastify();
    await app.register(errorHandling);
    await app.register(shedLoad, { overload });
    await app.register(authentication, { verifier, failures: undefined });
    await app.register(scopes);
    await assert.rejects(
      async () => {
        await app.register(async (routes) => {
          routes.get('/open', { schema: { response: { 200: { type: 'string' } } } }, async () => 'open');
        });
        await app.ready();
      },
      { message: 'GET /open declares no scope' },
    );
    await app.close().catch(() => undefined);
  });

  test('when they are registered in their order, then the app starts', async () => {
    const app = Fastify();
    await app.register(errorHandling);
    await app.register(shedLoad, { overload });
    await app.register(authentication, { verifier, failures: undefined });
    await app.register(scopes);
    await app.register(rateLimit, {
      buckets: undefined,
      policy: { perSecond: 1, burst: 1 },
      metrics: {} as never,
    });
    await app.ready();
    await app.close();
  });
});
