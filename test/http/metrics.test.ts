import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { VERSION } from '../../src/version.js';
import { after, backends, before, test } from '../support/backends.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

const PACKAGE_VERSION = JSON.parse(
  readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
).version;

/** The value of one sample line of a Prometheus text exposition, or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([key, value]) => line.includes(`${key}="${value}"`))) {
      return Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return undefined;
}

for (const backend of backends) {
  backend.describe(`metrics (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ backend });
    });
    after(() => server.close());

    test('when traffic has been served, then /metrics counts it by route template and status', async () => {
      await server.request('POST', '/v1/pets', { body: { name: 'Rex', categoryId: 1 } });
      await server.request('GET', '/v1/pets/1');
      await server.request('GET', '/v1/pets/2');
      await server.request('GET', '/v1/pets', { key: null });
      await server.request('GET', '/no/such/path');

      const res = await server.request('GET', '/metrics', { key: null });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4; charset=utf-8$/);
      const text = res.text;
      const get = { method: 'GET', route: '/v1/pets/:petId' };
      assert.equal(
        sample(text, 'petstore_http_requests_total', { method: 'POST', route: '/v1/pets', status: '201' }),
        1,
      );
      assert.equal(sample(text, 'petstore_http_requests_total', { ...get, status: '200' }), 1);
      assert.equal(sample(text, 'petstore_http_requests_total', { ...get, status: '404' }), 1);
      assert.equal(
        sample(text, 'petstore_http_requests_total', { method: 'GET', route: '/v1/pets', status: '401' }),
        1,
      );
      assert.equal(sample(text, 'petstore_http_requests_total', { route: 'unmatched', status: '404' }), 1);
      assert.equal(
        sample(text, 'petstore_http_request_duration_seconds_count', { ...get, status: '200' }),
        1,
      );
      assert.equal(
        sample(text, 'petstore_http_request_duration_seconds_bucket', { ...get, status: '200', le: '+Inf' }),
        1,
      );
      assert.equal(sample(text, 'petstore_rate_limited_total'), 0);
      assert.ok(
        (sample(text, 'petstore_process_resident_memory_bytes') ?? 0) > 0,
        'process metrics are exported',
      );
      assert.ok(!text.includes('/v1/pets/1"'), 'raw URLs never become label values');
    });

    test('when the latency histogram and the pool are read, then the buckets run from 0.5 ms to 2.5 s, and the pool shows on PostgreSQL only', async () => {
      await server.request('GET', '/v1/pets');
      const text = (await server.request('GET', '/metrics', { key: null })).text;
      const les = text
        .split('\n')
        .filter(
          (line) =>
            line.startsWith('petstore_http_request_duration_seconds_bucket{') &&
            line.includes('route="/v1/pets"') &&
            line.includes('method="GET"') &&
            line.includes('status="200"'),
        )
        .map((line) => /le="([^"]+)"/.exec(line)?.[1]);
      assert.deepEqual(les, [
        '0.0005',
        '0.001',
        '0.002',
        '0.005',
        '0.01',
        '0.025',
        '0.05',
        '0.1',
        '0.25',
        '0.5',
        '1',
        '2.5',
        '+Inf',
      ]);
      const pool = ['total', 'idle', 'waiting'].map((state) =>
        sample(text, 'petstore_db_pool_connections', { state }),
      );
      if (backend.name === 'postgres') {
        assert.ok(
          pool.every((value) => value !== undefined && value >= 0),
          `pool: ${pool}`,
        );
        assert.ok((pool[0] as number) >= 1, 'the pool holds the connection that served the request');
      } else assert.deepEqual(pool, [undefined, undefined, undefined], 'SQLite has no pool');
    });

    test('when /metrics is scraped, then petstore_build_info names the version and the Node.js version, with the value 1', async () => {
      const text = (await server.request('GET', '/metrics', { key: null })).text;
      assert.match(text, /^# TYPE petstore_build_info gauge$/m);
      const lines = text.split('\n').filter((line) => line.startsWith('petstore_build_info'));
      assert.deepEqual(lines, [`petstore_build_info{version="${VERSION}",node="${process.version}"} 1`]);
      assert.equal(VERSION, PACKAGE_VERSION);
    });

    test('when storage operations fail, then they are counted by operation', async () => {
      const broken = await startTestServer({ backend });
      try {
        await broken.storage.close();
        const res = await broken.request('POST', '/v1/pets', { body: { name: 'Rex', categoryId: 1 } });
        // A closed database is an unavailable one: 503, not a fault of the request or the service.
        assert.equal(res.status, 503);
        assert.equal(res.json<{ code: string }>().code, 'unavailable');
        const metrics = await broken.request('GET', '/metrics', { key: null });
        assert.equal(sample(metrics.text, 'petstore_storage_errors_total', { operation: 'pets.create' }), 1);
        assert.equal(
          sample(metrics.text, 'petstore_http_requests_total', {
            method: 'POST',
            route: '/v1/pets',
            status: '503',
          }),
          1,
        );
      } finally {
        await broken.app.close();
        await broken.database.drop();
      }
    });
  });
}
