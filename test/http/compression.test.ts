import assert from 'node:assert/strict';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { after, backends, before, test } from '../support/backends.js';
import { type RawHttpResponse, sendRaw } from '../support/raw-http.js';
import { parseExact } from '../support/raw-json.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

/**
 * Responses are compressed when the client asks (Accept-Encoding) and the body is at least 1 KiB:
 * a 100-pet page is, a one-pet page and an Error body are not. Read off the wire, so the bytes are
 * exactly what was sent. On both backends: a page read from SQLite is sent at once, one from PostgreSQL
 * later, and compression writes either after the handler has returned.
 */

const DECODERS: Record<string, (bytes: Buffer) => Buffer> = {
  gzip: gunzipSync,
  br: brotliDecompressSync,
  deflate: inflateSync,
};

for (const backend of backends) {
  backend.describe(`response compression (${backend.name})`, () => {
    let server: TestServer;
    /** The 100-pet page, uncompressed. */
    let plainPage: RawHttpResponse;

    const get = (path: string, acceptEncoding?: string) =>
      sendRaw(
        server.url,
        `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_KEY}\r\n${
          acceptEncoding === undefined ? '' : `Accept-Encoding: ${acceptEncoding}\r\n`
        }Connection: close\r\n\r\n`,
      );

    before(async () => {
      server = await startTestServer({ backend });
      for (let i = 0; i < 100; i++) {
        const res = await server.request('POST', '/v1/pets', {
          body: `{"name":"pet ${i}","categoryId":${9007199254740993n + BigInt(i)}}`,
        });
        assert.equal(res.status, 201);
      }
      plainPage = await get('/v1/pets?limit=100');
      assert.equal(plainPage.status, 200);
      assert.ok(plainPage.bytes.length > 1024, `a 100-pet page is ${plainPage.bytes.length} bytes`);
    });
    after(() => server.close());

    for (const [acceptEncoding, coding] of [
      ['gzip', 'gzip'],
      ['br', 'br'],
      ['deflate', 'deflate'],
      ['gzip, deflate, br', 'gzip'],
      ['br;q=1, gzip;q=0.5', 'br'],
    ] as const) {
      test(`when a 100-pet page is asked for with Accept-Encoding: ${acceptEncoding}, then it comes ${coding}-encoded, smaller, and decodes to the exact page`, async () => {
        const res = await get('/v1/pets?limit=100', acceptEncoding);
        assert.equal(res.status, 200);
        assert.equal(res.headers['content-encoding'], coding);
        assert.match(res.headers.vary ?? '', /accept-encoding/i);
        assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
        assert.equal(res.headers.link, plainPage.headers.link);
        assert.ok(res.bytes.length < plainPage.bytes.length / 4, `${res.bytes.length} bytes`);
        const decoded = (DECODERS[coding] as (bytes: Buffer) => Buffer)(res.bytes);
        assert.deepEqual(decoded, plainPage.bytes);
        const pets = parseExact<{ categoryId: bigint }[]>(decoded.toString());
        assert.equal(pets.length, 100);
        assert.equal(pets[0]?.categoryId, 9007199254740993n, 'int64 beyond 2^53 stays exact');
      });
    }

    for (const acceptEncoding of [undefined, 'identity', 'compress', 'gzip;q=0']) {
      test(`when a 100-pet page is asked for with ${acceptEncoding === undefined ? 'no Accept-Encoding' : `Accept-Encoding: ${acceptEncoding}`}, then it comes unencoded`, async () => {
        const res = await get('/v1/pets?limit=100', acceptEncoding);
        assert.equal(res.status, 200);
        assert.equal(res.headers['content-encoding'], undefined);
        assert.deepEqual(res.bytes, plainPage.bytes);
      });
    }

    test('when a one-pet page (under 1 KiB) is asked for with Accept-Encoding: gzip, then it comes unencoded', async () => {
      const res = await get('/v1/pets?limit=1', 'gzip');
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-encoding'], undefined);
      assert.ok(res.bytes.length < 1024);
      assert.equal(parseExact<unknown[]>(res.body).length, 1);
    });

    test('when a response is 1023 bytes, then it goes out as it is; at 1024 (1 KiB), then it is compressed', async () => {
      // A page of animals of one status, its last name chosen to make the page exactly `size` bytes.
      const pageOf = async (status: string, size: number): Promise<string> => {
        let last = 0;
        for (let i = 0; i < 3; i++) {
          const res = await server.request('POST', '/v1/pets', {
            body: { name: 'x'.repeat(255), categoryId: 1, status },
          });
          last = res.json<{ id: number }>().id;
        }
        const path = `/v1/pets?status=${status}`;
        const sofar = (await server.request('GET', path)).text.length;
        const pet = (name: string) => JSON.stringify({ id: last + 1, name, categoryId: 1, status });
        const name = 'n'.repeat(size - sofar - 1 - pet('').length);
        await server.request('POST', '/v1/pets', { body: { name, categoryId: 1, status } });
        assert.equal((await server.request('GET', path)).text.length, size, `the page of ${status} animals`);
        return path;
      };
      const small = await get(await pageOf('sold', 1023), 'gzip');
      assert.deepEqual([small.headers['content-encoding'], small.bytes.length], [undefined, 1023]);
      const large = await get(await pageOf('pending', 1024), 'gzip');
      assert.equal(large.headers['content-encoding'], 'gzip');
      assert.equal(gunzipSync(large.bytes).length, 1024);
    });

    test('when an error is answered to a client accepting gzip, then it is the plain Error body', async () => {
      const res = await get('/v1/pets/999999', 'gzip');
      assert.equal(res.status, 404);
      assert.equal(res.headers['content-encoding'], undefined);
      assert.deepEqual(JSON.parse(res.body), {
        code: 'not_found',
        message: 'no animal has this id',
        status: 404,
      });
    });
  });
}
