import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Fastify from 'fastify';
import { ApiKeyVerifier } from '../../src/domain/api-keys.js';
import type { Storage } from '../../src/domain/storage.js';
import { ServiceMetrics } from '../../src/http/observability/metrics.js';
import { authentication } from '../../src/http/request/auth.js';
import { errorHandling } from '../../src/http/request/errors.js';
import { shedLoad } from '../../src/http/request/overload.js';
import { rateLimit } from '../../src/http/request/rate-limit.js';
import { scopes } from '../../src/http/request/scopes.js';
import { ErrorBody } from '../../src/http/schemas/error.js';
import { MemoryBuckets } from '../../src/rate-limit/memory-buckets.js';
import { openStorage } from '../../src/storage/open-storage.js';
import { assertError } from '../support/error-body.js';
import { TEST_KEY, testConfig } from '../support/test-server.js';

/** The order of the HTTP concerns is declared by the plugins themselves, and Fastify holds to it. */
describe('plugin order', () => {
  const overload = { maxEventLoopDelayMs: 1_000, maxHeapUsedBytes: 1e12 };
  // The real services, on a database in memory: no stand-in of our own code.
  let storage: Storage;
  let verifier: ApiKeyVerifier;
  let metrics: ServiceMetrics;
  before(async () => {
    storage = await openStorage(testConfig('sqlite::memory:'));
    verifier = new ApiKeyVerifier(storage.apiKeys, [TEST_KEY]);
    metrics = new ServiceMetrics(storage);
  });
  after(() => storage.close());

  test('when the rate limit is registered before authentication, then Fastify refuses to start, naming both', async () => {
    const app = Fastify();
    await app.register(errorHandling);
    await app.register(shedLoad, { overload });
    await assert.rejects(
      async () => {
        await app.register(rateLimit, {
          buckets: undefined,
          policy: { perSecond: 1, burst: 1 },
          metrics,
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

  test('when they are registered in their order, then the app starts, and a request meets them in turn: no key 401, a key 200, the same key over its rate 429', async () => {
    const app = Fastify();
    // The Error schema the shared answers (401, 429) refer to, as the app adds it.
    app.addSchema(ErrorBody);
    await app.register(errorHandling);
    await app.register(shedLoad, { overload });
    await app.register(authentication, { verifier, failures: undefined });
    await app.register(scopes);
    await app.register(rateLimit, {
      buckets: new MemoryBuckets(() => 0),
      policy: { perSecond: 1, burst: 1 },
      metrics,
    });
    await app.register(async (routes) => {
      routes.get(
        '/pets',
        { config: { scope: 'pets:read' }, schema: { response: { 200: { type: 'string' } } } },
        async () => 'served',
      );
    });
    await app.ready();
    const get = async (key?: string) => {
      const res = await app.inject({
        method: 'GET',
        url: '/pets',
        headers: key ? { authorization: `Bearer ${key}` } : {},
      });
      return {
        status: res.statusCode,
        headers: new Headers(res.headers as Record<string, string>),
        text: res.body,
      };
    };
    assertError(await get(), 401, 'unauthorized');
    const served = await get(TEST_KEY);
    assert.equal(served.status, 200, served.text);
    assert.equal(served.text, 'served');
    // The clock of the buckets stands still: the one token is spent.
    assertError(await get(TEST_KEY), 429, 'rate_limited');
    await app.close();
  });
});
