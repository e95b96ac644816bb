import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { brotliCompressSync, constants } from 'node:zlib';
import { after, before, httpLayerBackends, test } from '../support/backends.js';
import { assertErrorAnswer } from '../support/error-body.js';
import { addAnimal, placeOrder } from '../support/orders.js';
import { sendRaw } from '../support/raw-http.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

/**
 * A compressed body that inflates far past the body limit is refused (413) and inflated no further:
 * the decoder is torn down with the answer. Before, it went on inflating, unread, after the 413
 * (796 bytes of brotli: 2.15 CPU-s; this test's bomb took about 4 CPU-s more after its answer).
 */

/** 1 GB of zeros, brotli: about a kilobyte on the wire. */
const BOMB = brotliCompressSync(Buffer.alloc(1_000_000_000), {
  params: { [constants.BROTLI_PARAM_QUALITY]: 5, [constants.BROTLI_PARAM_SIZE_HINT]: 1_000_000_000 },
});

/** How long the test watches the server after the answer: what a torn-down decoder cannot use. */
const WATCH_MS = 1_500;

/**
 * CPU the server process may use from sending the bomb to WATCH_MS after its answer: inflating up to
 * the 64 KiB limit and answering take a few milliseconds; inflating the whole bomb takes seconds.
 */
const CPU_BOUND_MS = 500;

for (const backend of httpLayerBackends) {
  backend.describe(`a compressed body past the limit (${backend.name})`, () => {
    let server: TestServer;
    let orderId: string;

    before(async () => {
      server = await startTestServer({ backend });
      orderId = String((await placeOrder(server, await addAnimal(server))).id);
    });
    after(() => server.close());

    for (const [operation, path] of [
      ['createPet', () => '/v1/pets'],
      ['cancelOrder, which takes no body', () => `/v1/store/orders/${orderId}/cancel`],
    ] as const) {
      test(`when ${operation} is sent ${BOMB.length} bytes of brotli that inflate to 1 GB, then it is 413 and the server uses under ${CPU_BOUND_MS} ms of CPU on it, answer and aftermath included`, async () => {
        const { host } = new URL(server.url);
        const before = process.cpuUsage();
        const res = await sendRaw(
          server.url,
          Buffer.concat([
            Buffer.from(
              [
                `POST ${path()} HTTP/1.1`,
                `Host: ${host}`,
                `Authorization: Bearer ${TEST_KEY}`,
                'Content-Type: application/json',
                'Content-Encoding: br',
                `Content-Length: ${BOMB.length}`,
                'Connection: close',
                '',
                '',
              ].join('\r\n'),
            ),
            BOMB,
          ]),
        );
        assertErrorAnswer(
          { status: res.status, contentType: res.headers['content-type'], text: res.body },
          413,
          'payload_too_large',
          'request body is too large',
        );
        await sleep(WATCH_MS);
        const used = process.cpuUsage(before);
        const usedMs = (used.user + used.system) / 1000;
        assert.ok(usedMs < CPU_BOUND_MS, `the server used ${usedMs.toFixed(0)} ms of CPU`);
      });
    }
  });
}
