import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { newApiKey } from '../../src/domain/api-keys.js';
import { after, before, describe, httpLayerBackends, test } from '../support/backends.js';
import { assertError } from '../support/error-body.js';
import { until } from '../support/eventually.js';
import { addAnimal, type OrderBody, placeOrder } from '../support/orders.js';
import { sendRaw } from '../support/raw-http.js';
import { startTestServer, TEST_KEY, type TestResponse, type TestServer } from '../support/test-server.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * The strong tag of an answer, as the service computes it: SHA-256 of its bytes (then a line break and
 * its `Link: rel="next"` header, when it has one), base64url, 27 characters.
 */
function tagOf(bytes: string | Buffer, link?: string | null): string {
  const hash = createHash('sha256').update(bytes);
  // Only the paging link counts: getPet's deprecation link is the same on every answer.
  if (link && /rel="next"/.test(link)) hash.update('\n').update(link);
  return `"${hash.digest('base64url').slice(0, 27)}"`;
}

/** Uncompressed unless a test asks otherwise: fetch would otherwise ask for gzip. */
const IDENTITY = { 'accept-encoding': 'identity' };

interface GetCase {
  operationId: string;
  path: () => string;
}

/** Asserts a 304: no body, no Content-Type or Content-Length, this ETag, and the cache directive. */
function assertNotModified(res: TestResponse, etag: string, what: string): void {
  assert.equal(res.status, 304, `${what}: ${res.status} ${res.text}`);
  assert.equal(res.text, '', what);
  assert.equal(res.headers.get('etag'), etag, what);
  assert.equal(res.headers.get('cache-control'), 'private, no-cache', what);
  assert.equal(res.headers.get('content-type'), null, what);
  assert.equal(res.headers.get('content-length'), null, what);
}

for (const backend of httpLayerBackends) {
  backend.describe(`conditional requests (${backend.name})`, () => {
    let server: TestServer;
    let petId: number;
    let order: OrderBody;
    let endpointId: number;
    /** An endpoint with one delivery, succeeded at its first attempt: its attempts stay as they are. */
    let delivered: { endpointId: number; eventId: number };
    let receiver: WebhookReceiver;

    before(async () => {
      server = await startTestServer({ backend, env: { WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' } });
      for (let i = 0; i < 12; i++)
        await addAnimal(server, 'available', `animal number ${i}, named at length`);
      receiver = await WebhookReceiver.start();
      const answered = await server.request('POST', '/v1/webhook-endpoints', {
        body: { url: receiver.url('/hooks'), types: ['pet.created'] },
      });
      assert.equal(answered.status, 201, answered.text);
      petId = await addAnimal(server);
      await receiver.waitFor(1);
      const succeeded = await until(
        async () =>
          (
            await server.request(
              'GET',
              `/v1/webhook-endpoints/${answered.json<{ id: number }>().id}/deliveries`,
            )
          ).json<{ eventId: number; status: string }[]>(),
        (deliveries) => deliveries[0]?.status === 'succeeded',
        'the delivery to succeed',
      );
      delivered = { endpointId: answered.json<{ id: number }>().id, eventId: succeeded[0]?.eventId ?? 0 };
      order = await placeOrder(server, petId);
      // Last, so that no event is delivered to it and its deliveries stay as they are.
      const endpoint = await server.request('POST', '/v1/webhook-endpoints', {
        body: { url: 'http://127.0.0.1:9/hooks' },
      });
      assert.equal(endpoint.status, 201, endpoint.text);
      endpointId = endpoint.json<{ id: number }>().id;
    });
    after(async () => {
      await server.close();
      await receiver.close();
    });

    const cases: GetCase[] = [
      { operationId: 'listPets', path: () => '/v1/pets?limit=5' },
      { operationId: 'getPet', path: () => `/v1/pets/${petId}` },
      { operationId: 'listOrders', path: () => '/v1/store/orders' },
      { operationId: 'getOrder', path: () => `/v1/store/orders/${order.id}` },
      { operationId: 'listEvents', path: () => '/v1/events?limit=3' },
      { operationId: 'getEvent', path: () => '/v1/events/1' },
      { operationId: 'listWebhookEndpoints', path: () => '/v1/webhook-endpoints' },
      { operationId: 'getWebhookEndpoint', path: () => `/v1/webhook-endpoints/${endpointId}` },
      { operationId: 'listWebhookDeliveries', path: () => `/v1/webhook-endpoints/${endpointId}/deliveries` },
      {
        operationId: 'listWebhookAttempts',
        path: () => `/v1/webhook-endpoints/${delivered.endpointId}/deliveries/${delivered.eventId}/attempts`,
      },
    ];

    test('when the OpenAPI document is read, then every GET operation under /v1 (not the document itself, nor the probes and metrics beside /v1) is one of those tested here, and documents If-None-Match, the ETag and Cache-Control of its 200, and its 304', async () => {
      const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as {
        paths: Record<string, Record<string, Record<string, unknown>>>;
      };
      const gets = Object.entries(doc.paths)
        .filter(([path]) => !['/openapi.json', '/metrics', '/healthz', '/readyz'].includes(path))
        .flatMap(([, item]) => (item.get ? [item.get] : []));
      assert.deepEqual(gets.map((op) => op.operationId).sort(), cases.map((c) => c.operationId).sort());
      for (const op of gets) {
        const what = String(op.operationId);
        const parameters = op.parameters as { name: string; in: string; required?: boolean }[];
        const header = parameters.find((p) => p.name === 'if-none-match');
        assert.deepEqual([header?.in, header?.required], ['header', false], what);
        const responses = op.responses as Record<
          string,
          { description: string; headers?: object; content?: object }
        >;
        for (const code of ['200', '304'])
          for (const name of ['ETag', 'Cache-Control'])
            assert.ok(Object.keys(responses[code]?.headers ?? {}).includes(name), `${what} ${code} ${name}`);
        assert.match(responses['304']?.description ?? '', /^Not Modified/, what);
        assert.equal(responses['304']?.content, undefined, `${what}: a 304 has no body`);
      }
    });

    for (const { operationId, path } of cases) {
      describe(operationId, () => {
        test('when it answers 200, then it carries a strong ETag, the digest of the bytes sent, and Cache-Control: private, no-cache', async () => {
          const res = await server.request('GET', path(), { headers: IDENTITY });
          assert.equal(res.status, 200, res.text);
          assert.equal(res.headers.get('etag'), tagOf(res.text, res.headers.get('link')));
          assert.equal(res.headers.get('cache-control'), 'private, no-cache');
        });

        test('when If-None-Match names the ETag, then 304 with the ETag and no body; HEAD the same', async () => {
          const first = await server.request('GET', path(), { headers: IDENTITY });
          const etag = first.headers.get('etag') as string;
          for (const method of ['GET', 'HEAD']) {
            const again = await server.request(method, path(), {
              headers: { ...IDENTITY, 'if-none-match': etag },
            });
            assertNotModified(again, etag, method);
          }
          const head = await server.request('HEAD', path(), { headers: IDENTITY });
          assert.equal(head.status, 200);
          assert.equal(head.headers.get('etag'), etag);
          assert.equal(head.headers.get('cache-control'), 'private, no-cache');
        });

        test('when If-None-Match is *, then 304 with the ETag', async () => {
          const etag = (await server.request('GET', path(), { headers: IDENTITY })).headers.get(
            'etag',
          ) as string;
          assertNotModified(
            await server.request('GET', path(), { headers: { ...IDENTITY, 'if-none-match': '*' } }),
            etag,
            '*',
          );
        });

        test('when If-None-Match lists several tags, one of them the ETag in its weak form, then 304 with that tag', async () => {
          const etag = (await server.request('GET', path(), { headers: IDENTITY })).headers.get(
            'etag',
          ) as string;
          const res = await server.request('GET', path(), {
            headers: { ...IDENTITY, 'if-none-match': `"other", W/${etag} ,, "yet-another"` },
          });
          assertNotModified(res, etag, 'a list');
        });

        for (const [label, header] of [
          ['another tag', (etag: string) => `"x${etag.slice(1)}`],
          ['the tag without quotes', (etag: string) => etag.slice(1, -1)],
          ['the tag unterminated', (etag: string) => etag.slice(0, -1)],
          ['two tags without a comma', (etag: string) => `"a" ${etag}`],
          ['the tag after a malformed one', (etag: string) => `abc, ${etag}`],
        ] as const) {
          test(`when If-None-Match is ${label}, then it matches nothing: 200 with the body and the ETag`, async () => {
            const first = await server.request('GET', path(), { headers: IDENTITY });
            const etag = first.headers.get('etag') as string;
            const res = await server.request('GET', path(), {
              headers: { ...IDENTITY, 'if-none-match': header(etag) },
            });
            assert.equal(res.status, 200);
            assert.equal(res.text, first.text);
            assert.equal(res.headers.get('etag'), etag);
          });
        }
      });
    }

    describe('when a page is compressed', () => {
      const get = (ifNoneMatch?: string, acceptEncoding?: string, method = 'GET') =>
        sendRaw(
          server.url,
          `${method} /v1/pets?limit=100 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_KEY}\r\n${
            acceptEncoding ? `Accept-Encoding: ${acceptEncoding}\r\n` : ''
          }${ifNoneMatch ? `If-None-Match: ${ifNoneMatch}\r\n` : ''}Connection: close\r\n\r\n`,
        );

      test('when a page is sent gzip-coded, then its ETag is the digest of the uncompressed bytes with -gzip, and either form gets 304 with the tag sent', async () => {
        const plain = await get();
        assert.equal(plain.headers['content-encoding'], undefined);
        assert.ok(plain.bytes.length >= 1024, 'large enough to be compressed');
        const identityTag = tagOf(plain.bytes, plain.headers.link);
        assert.equal(plain.headers.etag, identityTag);

        const gzipped = await get(undefined, 'gzip');
        assert.equal(gzipped.headers['content-encoding'], 'gzip');
        assert.deepEqual(gunzipSync(gzipped.bytes), plain.bytes);
        const gzipTag = `${identityTag.slice(0, -1)}-gzip"`;
        assert.equal(gzipped.headers.etag, gzipTag);
        assert.equal(gzipped.headers['cache-control'], 'private, no-cache');

        for (const [sent, accept] of [
          [gzipTag, 'gzip'],
          [identityTag, 'gzip'],
          [gzipTag, undefined],
        ] as const) {
          const again = await get(sent, accept);
          assert.equal(again.status, 304, `${sent} with ${accept}`);
          assert.equal(again.headers.etag, sent);
          assert.equal(again.bytes.length, 0);
          assert.equal(again.headers['content-encoding'], undefined);
          assert.equal(again.headers['content-length'], undefined);
        }
        assert.equal((await get(gzipTag, 'gzip')).headers.vary, 'Accept-Encoding');
      });

      test("when the same page is asked for with HEAD and gzip accepted, then it is not compressed and its ETag is the identity answer's", async () => {
        const plain = await get();
        const head = await get(undefined, 'gzip', 'HEAD');
        assert.equal(head.status, 200);
        assert.equal(head.headers['content-encoding'], undefined);
        assert.equal(head.headers.etag, plain.headers.etag);
        assert.equal(head.headers['content-length'], String(plain.bytes.length));
      });
    });

    describe('after a change', () => {
      test('when the order is delivered, then its old ETag, and the old ETags of the orders list, its animal and the event feed, no longer match: 200 with the new state and a new ETag', async () => {
        const paths = [
          `/v1/store/orders/${order.id}`,
          '/v1/store/orders',
          `/v1/pets/${petId}`,
          `/v1/pets?id=${petId}`,
          '/v1/events?limit=100',
        ];
        const before = new Map<string, string>();
        for (const path of paths) {
          const res = await server.request('GET', path, { headers: IDENTITY });
          before.set(path, res.headers.get('etag') as string);
          assertNotModified(
            await server.request('GET', path, {
              headers: { ...IDENTITY, 'if-none-match': before.get(path) as string },
            }),
            before.get(path) as string,
            path,
          );
        }
        const delivered = await server.request('POST', `/v1/store/orders/${order.id}/deliver`);
        assert.equal(delivered.status, 200, delivered.text);
        for (const path of paths) {
          const res = await server.request('GET', path, {
            headers: { ...IDENTITY, 'if-none-match': before.get(path) as string },
          });
          assert.equal(res.status, 200, path);
          assert.notEqual(res.headers.get('etag'), before.get(path), path);
          assert.equal(res.headers.get('etag'), tagOf(res.text, res.headers.get('link')), path);
        }
        const now = await server.request('GET', `/v1/store/orders/${order.id}`, { headers: IDENTITY });
        assert.equal(now.json<OrderBody>().status, 'delivered');
        order = now.json<OrderBody>();
      });
    });

    describe('a page that gains a next page', () => {
      test('when a full last page gains a next page (an animal added after it), then its old ETag no longer matches: 200, the same animals, and the next link', async () => {
        const all = await server.request('GET', '/v1/pets?limit=100', { headers: IDENTITY });
        const count = all.json<unknown[]>().length;
        assert.ok(count < 100);
        const path = `/v1/pets?limit=${count}`;
        const before = await server.request('GET', path, { headers: IDENTITY });
        assert.equal(before.headers.get('link'), null);
        const etag = before.headers.get('etag') as string;
        await addAnimal(server);
        const after = await server.request('GET', path, { headers: { ...IDENTITY, 'if-none-match': etag } });
        assert.equal(after.status, 200);
        assert.equal(after.text, before.text);
        assert.match(after.headers.get('link') ?? '', /rel="next"/);
        assert.notEqual(after.headers.get('etag'), etag);
        assert.equal(after.headers.get('etag'), tagOf(after.text, after.headers.get('link')));
      });
    });

    describe('checks before the 304', () => {
      test('when a key without the scope sends the current ETag, then 403, not 304', async () => {
        const etag = (await server.request('GET', '/v1/store/orders', { headers: IDENTITY })).headers.get(
          'etag',
        ) as string;
        const key = newApiKey('pets only', new Date(), { scopes: ['pets:read'] });
        await server.storage.apiKeys.insert(key.record);
        const res = await server.request('GET', '/v1/store/orders', {
          key: key.secret,
          headers: { ...IDENTITY, 'if-none-match': etag },
        });
        assertError(res, 403, 'forbidden');
        assert.equal(res.headers.get('etag'), null);
      });

      test('when no key is sent with the current ETag, then 401, not 304', async () => {
        const etag = (await server.request('GET', '/v1/pets?limit=5', { headers: IDENTITY })).headers.get(
          'etag',
        ) as string;
        const res = await server.request('GET', '/v1/pets?limit=5', {
          key: null,
          headers: { ...IDENTITY, 'if-none-match': etag },
        });
        assertError(res, 401, 'unauthorized');
        assert.equal(res.headers.get('etag'), null);
      });

      test('when the rate limit allows 3 requests, then each 304 counts like a 200 and the fourth is 429, not 304', async () => {
        const key = 'etag-rate-key-0123456789abcdef';
        const limited = await startTestServer({
          backend,
          database: server.database,
          env: { RATE_LIMIT_PER_SECOND: '0.01', RATE_LIMIT_BURST: '3', PETSTORE_API_KEYS: key },
        });
        try {
          const first = await limited.request('GET', '/v1/pets?limit=5', { key, headers: IDENTITY });
          assert.equal(first.status, 200);
          const etag = first.headers.get('etag') as string;
          const conditional = { key, headers: { ...IDENTITY, 'if-none-match': etag } };
          const second = await limited.request('GET', '/v1/pets?limit=5', conditional);
          assertNotModified(second, etag, 'second');
          assert.match(second.headers.get('ratelimit') ?? '', /;r=1;/);
          assertNotModified(await limited.request('GET', '/v1/pets?limit=5', conditional), etag, 'third');
          const fourth = await limited.request('GET', '/v1/pets?limit=5', conditional);
          assertError(fourth, 429, 'rate_limited');
          assert.equal(fourth.headers.get('etag'), null);
        } finally {
          await limited.close();
        }
      });
    });

    describe('only GET and HEAD', () => {
      test('when deliver (a POST that answers 200) and a DELETE carry If-None-Match, then never 304, and neither answer has an ETag', async () => {
        const mine = await placeOrder(server, await addAnimal(server));
        const current = (await server.request('GET', `/v1/store/orders/${mine.id}`, { headers: IDENTITY }))
          .headers;
        const path = `/v1/store/orders/${mine.id}/deliver`;
        // The second and third are safe retries: the same order, unchanged, as a GET would show it.
        for (const ifNoneMatch of [undefined, '*', current.get('etag') as string]) {
          const headers = { ...IDENTITY, ...(ifNoneMatch ? { 'if-none-match': ifNoneMatch } : {}) };
          const delivered = await server.request('POST', path, { headers });
          assert.equal(delivered.status, 200, `${ifNoneMatch}: ${delivered.text}`);
          assert.equal(delivered.json<OrderBody>().status, 'delivered');
          assert.deepEqual(
            [delivered.headers.get('etag'), delivered.headers.get('cache-control')],
            [null, null],
          );
        }
        const endpoint = await server.request('POST', '/v1/webhook-endpoints', {
          body: { url: 'http://127.0.0.1:9/deleted' },
        });
        assert.equal(endpoint.headers.get('etag'), null, 'a 201 has none either');
        const deleted = await server.request(
          'DELETE',
          `/v1/webhook-endpoints/${endpoint.json<{ id: number }>().id}`,
          {
            headers: { 'if-none-match': '*' },
          },
        );
        assert.deepEqual([deleted.status, deleted.headers.get('etag')], [204, null]);
      });
    });
  });
}
