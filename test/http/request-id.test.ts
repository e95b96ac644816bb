import assert from 'node:assert/strict';
import { after, before, httpLayerBackends, test } from '../support/backends.js';
import { sendRaw } from '../support/raw-http.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

for (const backend of httpLayerBackends) {
  backend.describe(`request ids (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ backend });
    });
    after(() => server.close());

    test('when a safe X-Request-Id is sent, then the response echoes it', async () => {
      const res = await server.request('GET', '/v1/pets', { headers: { 'x-request-id': 'trace-42.a:b_c' } });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-request-id'), 'trace-42.a:b_c');
    });

    test('when an X-Request-Id of 64 characters (the most kept) is sent, then the response echoes it', async () => {
      const longest = `trace-${'x'.repeat(58)}`;
      const res = await server.request('GET', '/v1/pets', { headers: { 'x-request-id': longest } });
      assert.equal(res.headers.get('x-request-id'), longest);
    });

    for (const [label, value] of [
      ['too long', 'x'.repeat(65)],
      ['with spaces', 'a b'],
      ['with a quote', 'a"b'],
      ['percent-encoded', 'caf%C3%A9'],
    ] as const) {
      test(`when the X-Request-Id sent is ${label}, then a fresh UUID is used instead`, async () => {
        const res = await server.request('GET', '/v1/pets', { headers: { 'x-request-id': value } });
        assert.match(res.headers.get('x-request-id') ?? '', UUID);
      });
    }

    test('when the X-Request-Id sent holds non-ASCII bytes (UTF-8 é), then a fresh UUID is used instead', async () => {
      // Raw bytes on the socket: fetch would refuse or re-encode a header value that is not ASCII.
      const res = await sendRaw(
        server.url,
        Buffer.from(
          `GET /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_KEY}\r\nX-Request-Id: café\r\nConnection: close\r\n\r\n`,
          'utf8',
        ),
      );
      assert.equal(res.status, 200, res.body);
      assert.match(res.headers['x-request-id'] ?? '', UUID);
    });

    test('when no X-Request-Id is sent, then every response, errors included, carries a distinct one', async () => {
      const responses = [
        await server.request('GET', '/v1/pets'),
        await server.request('GET', '/v1/pets', { key: null }),
        await server.request('GET', '/nowhere'),
        await server.request('GET', '/v1/pets/%zz'),
      ];
      const ids = responses.map((res) => res.headers.get('x-request-id') ?? '');
      for (const id of ids) assert.match(id, UUID);
      assert.equal(new Set(ids).size, ids.length);
    });
  });
}
