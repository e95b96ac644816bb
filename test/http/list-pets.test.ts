import assert from 'node:assert/strict';
import { after, backends, before, describe, test } from '../support/backends.js';
import { createPets, cursorOf, nextHref, type PetBody, toPath, walkPages } from '../support/paging.js';
import { startTestServer, type TestResponse, type TestServer } from '../support/test-server.js';

interface ErrorBody {
  code: string;
  message: string;
  status: number;
}

function assertInvalidRequest(res: TestResponse, ...named: string[]): ErrorBody {
  assert.equal(res.status, 400, res.text);
  const body = res.json<ErrorBody>();
  assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'status']);
  assert.equal(body.code, 'invalid_request');
  assert.equal(body.status, 400);
  for (const name of named) assert.match(body.message, new RegExp(`\\b${name}\\b`), body.message);
  return body;
}

const ids = (pets: readonly PetBody[]) => pets.map((pet) => pet.id);

/** One character of `text` at `index` replaced by a different base64url character. */
function replaceCharAt(text: string, index: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const current = text[index] as string;
  const position = alphabet.indexOf(current);
  // Flip the lowest bit of the character's 6-bit value ('.' becomes 'A').
  const replacement = position === -1 ? 'A' : (alphabet[position ^ 1] as string);
  return text.slice(0, index) + replacement + text.slice(index + 1);
}

for (const backend of backends) {
  backend.describe(`listPets (${backend.name})`, () => {
    describe('on an empty store', () => {
      let server: TestServer;
      before(async () => {
        server = await startTestServer({ backend });
      });
      after(() => server.close());

      test('when the store is empty, then the list is [] and has no Link', async () => {
        const res = await server.request('GET', '/v1/pets');
        assert.equal(res.status, 200);
        assert.equal(res.text, '[]');
        assert.deepEqual(res.json(), []);
        assert.equal(res.headers.get('link'), null);
      });

      test('when the store is empty and a status filter is given, then the list is [] and has no Link', async () => {
        const res = await server.request('GET', '/v1/pets?status=sold&limit=1');
        assert.equal(res.status, 200);
        assert.deepEqual(res.json(), []);
        assert.equal(res.headers.get('link'), null);
      });
    });

    describe('with 25 pets of every status', () => {
      let server: TestServer;
      let pets: PetBody[];
      before(async () => {
        server = await startTestServer({ backend });
        pets = await createPets(server, 25);
      });
      after(() => server.close());

      test('when no limit is given, then the first 20 pets come back in ascending id order with a next link', async () => {
        const res = await server.request('GET', '/v1/pets');
        assert.equal(res.status, 200);
        assert.deepEqual(res.json(), pets.slice(0, 20));
        const href = nextHref(res);
        assert.ok(href, 'the first page of 25 pets carries a next link');
        assert.match(href, /^\/v1\/pets\?limit=20&cursor=[^&]+$/);
        const rest = await server.request('GET', href);
        assert.equal(rest.status, 200);
        assert.deepEqual(rest.json(), pets.slice(20));
        assert.equal(rest.headers.get('link'), null);
      });

      test('when limit is 1, then exactly the first pet comes back with a next link', async () => {
        const res = await server.request('GET', '/v1/pets?limit=1');
        assert.equal(res.status, 200);
        assert.deepEqual(res.json(), [pets[0]]);
        assert.match(nextHref(res) ?? '', /^\/v1\/pets\?limit=1&cursor=[^&]+$/);
      });

      test('when limit is 100, then all 25 pets come back and there is no Link', async () => {
        const res = await server.request('GET', '/v1/pets?limit=100');
        assert.equal(res.status, 200);
        assert.deepEqual(res.json(), pets);
        assert.equal(res.headers.get('link'), null);
      });

      test('when limit equals the number of pets, then all come back and there is no Link', async () => {
        const res = await server.request('GET', '/v1/pets?limit=25');
        assert.equal(res.status, 200);
        assert.deepEqual(ids(res.json<PetBody[]>()), ids(pets));
        assert.equal(res.headers.get('link'), null);
      });

      for (const [label, raw] of [
        ['0', '0'],
        ['101', '101'],
        ['-1', '-1'],
        ['abc', 'abc'],
        ['1.5', '1.5'],
        ['empty', ''],
        ['1e1', '1e1'],
        ['0x10', '0x10'],
        ['" 5" (leading space)', '%205'],
      ] as const) {
        test(`when limit is ${label}, then 400 invalid_request names limit`, async () => {
          const res = await server.request('GET', `/v1/pets?limit=${raw}`);
          assertInvalidRequest(res, 'limit');
          assert.equal(res.headers.get('link'), null);
        });
      }

      for (const status of ['available', 'pending', 'sold'] as const) {
        test(`when status is ${status}, then only ${status} pets come back, in ascending id order`, async () => {
          const res = await server.request('GET', `/v1/pets?status=${status}&limit=100`);
          assert.equal(res.status, 200);
          const listed = res.json<PetBody[]>();
          const expected = pets.filter((pet) => pet.status === status);
          assert.ok(expected.length > 0);
          assert.deepEqual(listed, expected);
          assert.ok(listed.every((pet) => pet.status === status));
          assert.deepEqual(
            ids(listed),
            [...ids(listed)].sort((a, b) => a - b),
          );
          assert.equal(res.headers.get('link'), null);
        });
      }

      for (const bad of ['unknown', 'Sold', 'SOLD', '', 'sold,pending']) {
        test(`when status is "${bad}", then 400 invalid_request names status`, async () => {
          const res = await server.request('GET', `/v1/pets?status=${encodeURIComponent(bad)}`);
          const body = assertInvalidRequest(res, 'status');
          assert.match(body.message, /available, pending, sold/);
        });
      }

      test('when limit and status are both invalid, then one 400 message names both', async () => {
        const res = await server.request('GET', '/v1/pets?limit=0&status=bogus');
        const body = assertInvalidRequest(res, 'limit', 'status');
        assert.match(body.message, /limit[^;]*;.*status|status[^;]*;.*limit/);
      });

      test('when more filtered pets exist than the limit, then the Link has the exact next form', async () => {
        const res = await server.request('GET', '/v1/pets?limit=2&status=sold');
        assert.equal(res.status, 200);
        const sold = pets.filter((pet) => pet.status === 'sold');
        assert.deepEqual(res.json(), sold.slice(0, 2));
        const link = res.headers.get('link');
        assert.ok(link);
        assert.match(link, /^<\/v1\/pets\?limit=2&status=sold&cursor=[A-Za-z0-9._~%-]+>; rel="next"$/);
      });

      test('when the next links are followed, then every filtered pet is visited exactly once in order and the last page has no Link', async () => {
        const sold = pets.filter((pet) => pet.status === 'sold');
        assert.equal(sold.length, 8);
        const pages = await walkPages(server, '/v1/pets?limit=2&status=sold');
        assert.deepEqual(
          pages.map((page) => page.length),
          [2, 2, 2, 2],
        );
        assert.deepEqual(pages.flat(), sold);
      });

      test('when the next links are followed with limit 7, then every pet is visited exactly once in ascending order', async () => {
        const pages = await walkPages(server, '/v1/pets?limit=7');
        assert.deepEqual(
          pages.map((page) => page.length),
          [7, 7, 7, 4],
        );
        assert.deepEqual(pages.flat(), pets);
        assert.equal(new Set(ids(pages.flat())).size, pets.length);
      });

      test('when every next link is inspected, then each keeps the limit and the status filter', async () => {
        let path: string | undefined = '/v1/pets?limit=3&status=pending';
        let links = 0;
        while (path !== undefined) {
          const res = await server.request('GET', path);
          assert.equal(res.status, 200);
          const href = nextHref(res);
          if (href !== undefined) {
            links++;
            const query = new URL(href, 'http://relative.invalid').searchParams;
            assert.equal(query.get('limit'), '3');
            assert.equal(query.get('status'), 'pending');
          }
          path = href;
        }
        // 8 pending pets in pages of 3: two pages with a next link, the third without.
        assert.equal(links, 2);
      });

      test('when the body is read, then it is a bare JSON array of pets', async () => {
        const res = await server.request('GET', '/v1/pets?limit=3');
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
        assert.equal(res.text.trimStart()[0], '[');
        const body = res.json<unknown>();
        assert.ok(Array.isArray(body));
        assert.deepEqual(body, pets.slice(0, 3));
        for (const pet of body) {
          assert.deepEqual(Object.keys(pet).sort(), ['categoryId', 'id', 'name', 'status']);
        }
      });

      test('when one character of a cursor is changed, then 400 invalid_request names the cursor', async () => {
        const first = await server.request('GET', '/v1/pets?limit=5');
        const cursor = cursorOf(nextHref(first) ?? '');
        const tampered = replaceCharAt(cursor, 0);
        assert.notEqual(tampered, cursor);
        const res = await server.request('GET', `/v1/pets?limit=5&cursor=${encodeURIComponent(tampered)}`);
        assertInvalidRequest(res, 'cursor');
      });

      test('when any single character of a cursor is changed, then every such cursor is refused with 400', async () => {
        const first = await server.request('GET', '/v1/pets?limit=5');
        const cursor = cursorOf(nextHref(first) ?? '');
        const accepted: string[] = [];
        for (let i = 0; i < cursor.length; i++) {
          const tampered = replaceCharAt(cursor, i);
          assert.notEqual(tampered, cursor);
          const res = await server.request('GET', `/v1/pets?limit=5&cursor=${encodeURIComponent(tampered)}`);
          if (res.status !== 400) accepted.push(`${tampered} (position ${i}): ${res.status}`);
          else assertInvalidRequest(res, 'cursor');
        }
        assert.deepEqual(accepted, [], `tampered cursors accepted:\n${accepted.join('\n')}`);
      });

      for (const garbage of ['garbage', 'abc.def', 'x'.repeat(256), '.', 'MTI6.AAAAAAAAAAAAAAAAAAAAAA']) {
        test(`when the cursor is garbage (${garbage.slice(0, 30)}), then 400 invalid_request`, async () => {
          const res = await server.request('GET', `/v1/pets?cursor=${encodeURIComponent(garbage)}`);
          assertInvalidRequest(res, 'cursor');
        });
      }

      test('when the cursor is empty or longer than 256 characters, then 400 invalid_request names the cursor', async () => {
        assertInvalidRequest(await server.request('GET', '/v1/pets?cursor='), 'cursor');
        assertInvalidRequest(await server.request('GET', `/v1/pets?cursor=${'a'.repeat(257)}`), 'cursor');
      });

      test('when a cursor is used with a different status filter, then 400 invalid_request', async () => {
        const soldPage = await server.request('GET', '/v1/pets?limit=2&status=sold');
        const soldCursor = cursorOf(nextHref(soldPage) ?? '');
        assertInvalidRequest(
          await server.request('GET', `/v1/pets?limit=2&status=pending&cursor=${soldCursor}`),
          'cursor',
        );
        assertInvalidRequest(await server.request('GET', `/v1/pets?limit=2&cursor=${soldCursor}`), 'cursor');

        const allPage = await server.request('GET', '/v1/pets?limit=2');
        const allCursor = cursorOf(nextHref(allPage) ?? '');
        assertInvalidRequest(
          await server.request('GET', `/v1/pets?limit=2&status=sold&cursor=${allCursor}`),
          'cursor',
        );
      });

      test('when a cursor issued by another store is used, then 400 invalid_request', async () => {
        const other = await startTestServer({ backend });
        try {
          await createPets(other, 3);
          const foreign = cursorOf(nextHref(await other.request('GET', '/v1/pets?limit=1')) ?? '');
          assertInvalidRequest(await server.request('GET', `/v1/pets?limit=1&cursor=${foreign}`), 'cursor');
        } finally {
          await other.close();
        }
      });
    });

    describe('with PUBLIC_BASE_URL set', () => {
      let server: TestServer;
      let pets: PetBody[];
      before(async () => {
        server = await startTestServer({ backend, env: { PUBLIC_BASE_URL: 'https://api.example.com/v1' } });
        pets = await createPets(server, 7);
      });
      after(() => server.close());

      test('when more pets exist, then the next Link is absolute under the public base address', async () => {
        const res = await server.request('GET', '/v1/pets?limit=2&status=available');
        assert.equal(res.status, 200);
        const link = res.headers.get('link');
        assert.ok(link);
        assert.match(
          link,
          /^<https:\/\/api\.example\.com\/v1\/pets\?limit=2&status=available&cursor=[A-Za-z0-9._~%-]+>; rel="next"$/,
        );
      });

      test('when the absolute next links are followed, then every pet is visited exactly once', async () => {
        const pages = await walkPages(server, '/v1/pets?limit=2');
        assert.deepEqual(pages.flat(), pets);
        const res = await server.request('GET', '/v1/pets?limit=2');
        assert.equal(toPath(nextHref(res) ?? '').startsWith('/v1/pets?limit=2&cursor='), true);
      });
    });
  });
}
