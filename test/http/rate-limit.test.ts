import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createConnection } from 'node:net';
import { newApiKey } from '../../src/domain/api-keys.js';
import { after, before, httpLayerBackends, type TestDatabase, test } from '../support/backends.js';
import { until } from '../support/eventually.js';
import { freePort } from '../support/free-port.js';
import { captureLog } from '../support/log-capture.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { startTestServer, type TestResponse, type TestServer } from '../support/test-server.js';

/** The Redis that CI runs (.ci/run starts it). */
const SHARED_REDIS = 'redis://127.0.0.1:6379';
/** So slow that no token comes back during a test: what each test sees is exact, whatever the timing. */
const NO_REFILL = { RATE_LIMIT_PER_SECOND: '0.01' };

/** A key of its own for each test: buckets in a shared Redis never carry over between tests or runs. */
const newKey = () => `rate-test-${randomBytes(12).toString('hex')}`;

/** Resolves once something accepts connections on the port (bounded: gives up after 10 s). */
async function reachable(port: number): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port }, () => {
        socket.end();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`nothing listens on ${port}`);
}

/** What the service logs (at warn) once when its Redis connection fails, however long it stays away. */
const REDIS_CONNECTION_LOST =
  'redis: connection lost or refused; reconnecting every 2 s at most, logged again once it is back';

const counterValue = async (server: TestServer, name: string): Promise<number> => {
  const text = (await server.request('GET', '/metrics', { key: null })).text;
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1] ?? Number.NaN);
};

const fields = (res: TestResponse) => ({
  policy: res.headers.get('ratelimit-policy'),
  limit: res.headers.get('ratelimit'),
  retryAfter: res.headers.get('retry-after'),
});

for (const backend of httpLayerBackends) {
  backend.describe(`rate limits per API key, in memory (${backend.name})`, () => {
    const key = newKey();
    const otherKey = newKey();
    let server: TestServer;
    // The buckets read the service's clock: standing still, every figure below is exact.
    let clock = Date.parse('2026-01-01T00:00:00Z');
    const now = () => new Date(clock);
    before(async () => {
      server = await startTestServer({
        backend,
        env: { ...NO_REFILL, RATE_LIMIT_BURST: '3', PETSTORE_API_KEYS: `${key},${otherKey}` },
        now,
      });
    });
    after(() => server.close());

    test('when a key sends more than its burst, then the excess gets 429 rate_limited with Retry-After and the RateLimit fields', async () => {
      const before = await counterValue(server, 'petstore_rate_limited_total');
      for (const remaining of [2, 1, 0]) {
        const res = await server.request('GET', '/v1/pets', { key });
        assert.equal(res.status, 200, res.text);
        // q: the burst; w: seconds for an empty bucket to refill (3 tokens at 0.01/s).
        assert.deepEqual(fields(res), {
          policy: '"per-key";q=3;w=300',
          limit: `"per-key";r=${remaining};t=${(3 - remaining) * 100}`,
          retryAfter: null,
        });
      }
      const refused = await server.request('POST', '/v1/pets', {
        key,
        body: { name: 'Late', categoryId: 1 },
      });
      assert.equal(refused.status, 429, refused.text);
      assert.deepEqual(refused.json(), {
        code: 'rate_limited',
        message: 'too many requests for this API key: at most 3 at once and 0.01 per second',
        status: 429,
      });
      const { policy, limit, retryAfter } = fields(refused);
      assert.equal(policy, '"per-key";q=3;w=300');
      assert.equal(limit, '"per-key";r=0;t=300');
      // Seconds until one token is back: 100 at 0.01/s.
      assert.equal(retryAfter, '100');
      assert.equal(await counterValue(server, 'petstore_rate_limited_total'), before + 1);
    });

    test('when one key is limited, then another key still passes', async () => {
      assert.equal((await server.request('GET', '/v1/pets', { key })).status, 429);
      const res = await server.request('GET', '/v1/pets', { key: otherKey });
      assert.equal(res.status, 200, res.text);
      assert.equal(fields(res).limit, '"per-key";r=2;t=100');
    });

    test('when requests fail authentication, then they spend no token and carry no RateLimit fields', async () => {
      const fresh = await startTestServer({
        backend,
        env: { ...NO_REFILL, RATE_LIMIT_BURST: '2', PETSTORE_API_KEYS: key },
        now,
      });
      try {
        for (let i = 0; i < 5; i++) {
          const res = await fresh.request('GET', '/v1/pets', { key: 'not-a-key-0123456789abcdef' });
          assert.equal(res.status, 401);
          assert.equal(fields(res).limit, null);
        }
        assert.equal((await fresh.request('GET', '/v1/pets', { key })).status, 200);
        assert.equal((await fresh.request('GET', '/v1/pets', { key })).status, 200);
        assert.equal((await fresh.request('GET', '/v1/pets', { key })).status, 429);
      } finally {
        await fresh.close();
      }
    });

    test('when a key lacks the scope an operation needs, then its 403 costs no token', async () => {
      const reader = newApiKey('reader', now(), { scopes: ['pets:read'] });
      await server.storage.apiKeys.insert(reader.record);
      for (let i = 0; i < 5; i++) {
        const refused = await server.request('POST', '/v1/pets', {
          key: reader.secret,
          body: { name: 'Rex', categoryId: 1 },
        });
        assert.equal(refused.status, 403, refused.text);
        assert.equal(fields(refused).limit, null);
      }
      // The whole burst of 3 is still there.
      const first = await server.request('GET', '/v1/pets', { key: reader.secret });
      assert.equal(fields(first).limit, '"per-key";r=2;t=100');
    });

    test('when a key is limited, then the probes, metrics and the OpenAPI document still answer', async () => {
      assert.equal((await server.request('GET', '/v1/pets', { key })).status, 429);
      for (const path of ['/healthz', '/readyz', '/metrics', '/v1/openapi.json']) {
        assert.equal((await server.request('GET', path, { key })).status, 200, path);
      }
    });

    test('when a counted request is refused for another reason, then its error still carries the RateLimit fields', async () => {
      const fresh = await startTestServer({ backend, env: { ...NO_REFILL, RATE_LIMIT_BURST: '5' }, now });
      try {
        const invalid = await fresh.request('GET', '/v1/pets?limit=0');
        assert.equal(invalid.status, 400);
        assert.equal(fields(invalid).limit, '"per-key";r=4;t=100');
        const missing = await fresh.request('POST', '/v1/pets', { body: { name: 'x' } });
        assert.equal(missing.status, 400);
        assert.equal(fields(missing).limit, '"per-key";r=3;t=200');
      } finally {
        await fresh.close();
      }
    });

    test('when RATE_LIMIT_PER_SECOND is 0, then nothing is limited and no RateLimit fields are sent', async () => {
      const unlimited = await startTestServer({
        backend,
        env: { RATE_LIMIT_PER_SECOND: '0', RATE_LIMIT_BURST: '1' },
      });
      try {
        for (let i = 0; i < 5; i++) {
          const res = await unlimited.request('GET', '/v1/pets');
          assert.equal(res.status, 200);
          assert.equal(fields(res).policy, null);
        }
      } finally {
        await unlimited.close();
      }
    });

    // Last of this server's tests: it moves the clock, which refills every key's bucket.
    test('when the Retry-After has passed, then one token is back, and no more', async () => {
      const refill = newApiKey('refill', now());
      await server.storage.apiKeys.insert(refill.record);
      for (let i = 0; i < 3; i++) await server.request('GET', '/v1/pets', { key: refill.secret });
      const refused = await server.request('GET', '/v1/pets', { key: refill.secret });
      assert.deepEqual([refused.status, fields(refused).retryAfter], [429, '100']);
      clock += 99_999;
      const early = await server.request('GET', '/v1/pets', { key: refill.secret });
      assert.deepEqual([early.status, fields(early).retryAfter], [429, '1']);
      clock += 1;
      const back = await server.request('GET', '/v1/pets', { key: refill.secret });
      // Empty again: 300 s until all 3 are back.
      assert.deepEqual([back.status, fields(back).limit], [200, '"per-key";r=0;t=300']);
      assert.equal((await server.request('GET', '/v1/pets', { key: refill.secret })).status, 429);
    });
  });

  backend.describe(`rate limits shared through Redis by two nodes (${backend.name})`, () => {
    let database: TestDatabase;
    const key = newKey();
    let nodes: [TestServer, TestServer];
    before(async () => {
      database = await backend.create();
      const env = { ...NO_REFILL, RATE_LIMIT_BURST: '4', REDIS_URL: SHARED_REDIS, PETSTORE_API_KEYS: key };
      nodes = [await startTestServer({ database, env }), await startTestServer({ database, env })];
    });
    after(async () => {
      for (const node of nodes ?? []) await node.close();
      await database?.drop();
    });

    test('when a key alternates between two nodes, then together they allow one burst, not one each', async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 10; i++) {
        statuses.push((await (nodes[i % 2] as TestServer).request('GET', '/v1/pets', { key })).status);
      }
      assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429, 429, 429, 429, 429]);
    });

    test('when requests race on both nodes, then exactly the burst passes', async () => {
      const raceKey = newKey();
      const env = {
        ...NO_REFILL,
        RATE_LIMIT_BURST: '5',
        REDIS_URL: SHARED_REDIS,
        PETSTORE_API_KEYS: raceKey,
      };
      const pair = [await startTestServer({ database, env }), await startTestServer({ database, env })];
      try {
        const answers = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            (pair[i % 2] as TestServer).request('GET', '/v1/pets', { key: raceKey }),
          ),
        );
        assert.equal(answers.filter((a) => a.status === 200).length, 5);
        assert.equal(answers.filter((a) => a.status === 429).length, 15);
      } finally {
        for (const node of pair) await node.close();
      }
    });
  });

  backend.describe(`rate limits when Redis is away (${backend.name})`, () => {
    test('when Redis answers slower than 500 ms, then requests pass unlimited instead of waiting for it, and are limited again once it is quick', async () => {
      const redisPort = Number(new URL(SHARED_REDIS).port);
      const proxy = await TcpProxy.start('127.0.0.1', redisPort);
      const slowKey = newKey();
      const server = await startTestServer({
        backend,
        env: {
          ...NO_REFILL,
          RATE_LIMIT_BURST: '1',
          REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
          PETSTORE_API_KEYS: slowKey,
        },
      });
      try {
        const ask = () => server.request('GET', '/v1/pets', { key: slowKey });
        assert.equal((await ask()).status, 200, 'the burst');
        assert.equal((await ask()).status, 429, 'Redis answers: the key is limited');

        // Slower than the documented 500 ms, but an answer does come: a limiter that waited for it would say 429.
        proxy.delayAnswers(1_500);
        for (let i = 0; i < 3; i++) {
          const res = await ask();
          assert.equal(res.status, 200, `request ${i} while Redis is slow: ${res.text}`);
          assert.equal(fields(res).limit, null, 'no RateLimit fields when nothing was counted');
        }
        assert.ok(
          (await counterValue(server, 'petstore_rate_limit_fail_open_total')) >= 3,
          'each counted as failing open',
        );

        proxy.delayAnswers(0);
        // The client may need to reconnect after its timeouts; limiting comes back by itself.
        const limited = await until(ask, (res) => res.status === 429, 'limited again once Redis is quick');
        assert.equal(limited.json<{ code: string }>().code, 'rate_limited');
      } finally {
        await server.close();
        await proxy.close();
      }
    });

    test('when REDIS_URL points where nothing listens, then requests are served unlimited and counted as failing open', async () => {
      const port = await freePort();
      const { lines, logger } = captureLog('warn');
      const server = await startTestServer({
        backend,
        env: { ...NO_REFILL, RATE_LIMIT_BURST: '1', REDIS_URL: `redis://127.0.0.1:${port}` },
        logger,
      });
      try {
        for (let i = 0; i < 3; i++) {
          const res = await server.request('GET', '/v1/pets');
          assert.equal(res.status, 200, res.text);
          assert.equal(fields(res).limit, null);
        }
        assert.equal(await counterValue(server, 'petstore_rate_limit_fail_open_total'), 3);
        // Logged at warn once for the outage, not once per request: the connection's, then the limiter's.
        const warnings = lines.filter((entry) => entry.level === 40);
        assert.deepEqual(
          warnings.map((entry) => entry.msg),
          [REDIS_CONNECTION_LOST, 'rate limiter unavailable: requests pass unlimited'],
        );
      } finally {
        await server.close();
      }
    });

    test('when REDIS_URL points where nothing listens, then each failed reconnect is counted, and the outage is logged once', async () => {
      const port = await freePort();
      const { lines, logger } = captureLog('warn');
      const server = await startTestServer({
        backend,
        env: { ...NO_REFILL, RATE_LIMIT_BURST: '1', REDIS_URL: `redis://127.0.0.1:${port}` },
        logger,
      });
      try {
        // Reconnects 100, 200, 300… ms apart: several fail within a second and a half.
        const failures = await until(
          async () => {
            const text = (await server.request('GET', '/metrics', { key: null })).text;
            const line = text
              .split('\n')
              .find((l) => l.startsWith('petstore_redis_errors_total{source="connection"} '));
            return Number(line?.split(' ')[1] ?? 0);
          },
          (count) => count >= 3,
          'three failed connection attempts to be counted',
        );
        assert.ok(failures >= 3);
        const warnings = lines.filter((entry) => entry.level === 40).map((entry) => entry.msg);
        assert.deepEqual(
          warnings.filter((msg) => msg === REDIS_CONNECTION_LOST),
          [REDIS_CONNECTION_LOST],
        );
      } finally {
        await server.close();
      }
    });

    test('when the Redis in use stops, then the service keeps serving, and limits again once Redis is back', async () => {
      const port = await freePort();
      const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
      const startRedis = async (): Promise<ChildProcess> => {
        const child = spawn('redis-server', args, { stdio: 'ignore' });
        await reachable(port);
        return child;
      };
      let redis = await startRedis();
      const key = newKey();
      const server = await startTestServer({
        backend,
        env: {
          ...NO_REFILL,
          RATE_LIMIT_BURST: '1',
          REDIS_URL: `redis://127.0.0.1:${port}`,
          PETSTORE_API_KEYS: key,
        },
      });
      try {
        assert.equal((await server.request('GET', '/v1/pets', { key })).status, 200);
        assert.equal((await server.request('GET', '/v1/pets', { key })).status, 429);

        await new Promise((resolve) => {
          redis.once('exit', resolve);
          redis.kill('SIGKILL');
        });
        for (let i = 0; i < 3; i++) {
          const res = await server.request('GET', '/v1/pets', { key });
          assert.equal(res.status, 200, 'fails open while Redis is away');
        }
        assert.ok((await counterValue(server, 'petstore_rate_limit_fail_open_total')) >= 3);

        // A new, empty Redis: the client reconnects by itself and limiting resumes (bounded wait).
        redis = await startRedis();
        const statuses: number[] = [];
        for (let attempt = 0; attempt < 100 && !statuses.includes(429); attempt++) {
          statuses.push((await server.request('GET', '/v1/pets', { key })).status);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        assert.ok(statuses.includes(429), 'limits again once Redis is back');
      } finally {
        await server.close();
        redis.kill('SIGKILL');
      }
    });
  });
}
