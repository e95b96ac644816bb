import assert from 'node:assert/strict';
import { after, backends, before, test } from '../support/backends.js';
import { assertError } from '../support/error-body.js';
import { until } from '../support/eventually.js';
import { startTestServer, type TestResponse, type TestServer } from '../support/test-server.js';

/** Asks until an answer is not 200: the load shedder samples on its own schedule, so the refusal is awaited, not timed. */
const firstRefusal = (ask: () => Promise<TestResponse>, beforeEach?: () => void): Promise<TestResponse> =>
  until(
    () => {
      beforeEach?.();
      return ask();
    },
    (res) => res.status !== 200,
    'the server refuses a request',
  );

/** Blocks this thread (and so the test server's event loop, which shares it), as a stuck handler would. */
const blockEventLoop = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

const assertUnavailable = (res: TestResponse) => {
  assertError(res, 503, 'unavailable', 'the service is overloaded; retry after a few seconds');
  assert.equal(res.headers.get('retry-after'), '5');
};

for (const backend of backends) {
  backend.describe(`overload: memory above its threshold (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      // 1 MiB: any live process is above it, so the node is "under pressure" from its first sample on.
      server = await startTestServer({ backend, env: { OVERLOAD_MAX_HEAP_USED_MB: '1' } });
    });
    after(() => server.close());

    test('when the heap in use is above the threshold, then /v1 answers 503 unavailable with Retry-After and an Error body', async () => {
      const res = await firstRefusal(() => server.request('GET', '/v1/pets'));
      assertUnavailable(res);
      // At once, before authentication: no key needed to be refused.
      assertUnavailable(
        await server.request('POST', '/v1/pets', { key: null, body: { name: 'x', categoryId: 1 } }),
      );
    });

    test('when the node is overloaded, then the probes and metrics still answer, so it is seen alive', async () => {
      assertUnavailable(await firstRefusal(() => server.request('GET', '/v1/pets')));
      for (const path of ['/healthz', '/readyz', '/metrics']) {
        assert.equal((await server.request('GET', path, { key: null })).status, 200, path);
      }
    });
  });

  backend.describe(`overload: event loop lagging (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ backend, env: { OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '1' } });
    });
    after(() => server.close());

    test('when the event loop was blocked past the threshold, then the next /v1 request gets 503 unavailable', async () => {
      const res = await firstRefusal(
        () => server.request('GET', '/v1/pets'),
        () => blockEventLoop(1_200),
      );
      assertUnavailable(res);
    });
  });
}
