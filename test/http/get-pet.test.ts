import assert from 'node:assert/strict';
import { after, backends, before, test } from '../support/backends.js';
import { assertError } from '../support/error-body.js';
import { exactInt, rawRequest } from '../support/raw-json.js';
import { startTestServer, type TestResponse, type TestServer } from '../support/test-server.js';

interface PetBody {
  id: number | bigint;
  name: string;
  categoryId: number | bigint;
  status: string;
}

const JSON_UTF8 = 'application/json; charset=utf-8';
/** RFC 9745: deprecated since 2026-11-01T00:00:00Z, as a structured-field date (Unix seconds). */
const DEPRECATION = '@1793491200';
/** RFC 8594: removal on 5 December 2030, as an HTTP-date. */
const SUNSET = 'Thu, 05 Dec 2030 00:00:00 GMT';
const SUNSET_INSTANT = Date.parse('2030-12-05T00:00:00Z');
const DOCS_LINK = '</docs#/pets/listPets>; rel="deprecation"; type="text/html"';
const ABSOLUTE_DOCS_LINK =
  '<https://api.example.com/docs#/pets/listPets>; rel="deprecation"; type="text/html"';
const GONE_MESSAGE = `getPet was removed on ${SUNSET}; use GET /v1/pets?id=<petId>`;
const NOT_FOUND_MESSAGE = 'no animal has this id';
/** A clock well before the sunset, whatever the real date is when the tests run. */
const BEFORE_SUNSET = new Date('2027-01-01T00:00:00Z');

/** Asserts the three deprecation headers every getPet response carries, with their exact values. */
function assertDeprecationHeaders(res: TestResponse, link = DOCS_LINK): void {
  assert.deepEqual(
    {
      deprecation: res.headers.get('deprecation'),
      sunset: res.headers.get('sunset'),
      link: res.headers.get('link'),
    },
    { deprecation: DEPRECATION, sunset: SUNSET, link },
  );
}

/** Creates a pet from a raw JSON text (so int64 literals stay exact) and returns the 201's body text. */
async function create(server: TestServer, json: string): Promise<{ id: number; text: string }> {
  const res = await server.request('POST', '/v1/pets', { body: json });
  assert.equal(res.status, 201, res.text);
  const { id } = res.exact<{ id: number }>();
  return { id, text: res.text };
}

for (const backend of backends) {
  backend.describe(`getPet (${backend.name})`, () => {
    let server: TestServer;
    let rex: { id: number; text: string };
    before(async () => {
      server = await startTestServer({ backend, now: () => BEFORE_SUNSET });
      rex = await create(server, '{"name":"Rex","categoryId":1}');
    });
    after(() => server.close());

    test('when the pet exists, then 200 returns it exactly as created', async () => {
      const res = await server.request('GET', `/v1/pets/${rex.id}`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), JSON_UTF8);
      assert.deepEqual(res.exact(), { id: rex.id, name: 'Rex', categoryId: 1, status: 'available' });
      assert.equal(res.text, rex.text);
    });

    test('when the pet exists, then the 200 carries Deprecation, Sunset and the deprecation Link', async () => {
      const res = await server.request('GET', `/v1/pets/${rex.id}`);
      assert.equal(res.status, 200);
      assertDeprecationHeaders(res);
    });

    const stored: { when: string; name: string; categoryId: string; status: string }[] = [
      { when: 'categoryId 2^63-1', name: 'Max', categoryId: '9223372036854775807', status: 'sold' },
      { when: 'categoryId -2^63', name: 'Min', categoryId: '-9223372036854775808', status: 'pending' },
      { when: 'categoryId 2^53+1', name: 'Odd', categoryId: '9007199254740993', status: 'available' },
      { when: 'a name with spaces and an emoji', name: ' 🐶 Rex ', categoryId: '3', status: 'sold' },
    ];
    for (const { when, name, categoryId, status } of stored) {
      test(`when the pet has ${when}, then 200 reads it back exactly`, async () => {
        const created = await create(
          server,
          `{"name":${JSON.stringify(name)},"categoryId":${categoryId},"status":"${status}"}`,
        );
        const res = await server.request('GET', `/v1/pets/${created.id}`);
        assert.equal(res.status, 200);
        assert.equal(res.text, created.text);
        assert.ok(res.text.includes(`"categoryId":${categoryId},`), res.text);
        assert.deepEqual(res.exact<PetBody>(), {
          id: created.id,
          name,
          categoryId: exactInt(categoryId),
          status,
        });
        assertDeprecationHeaders(res);
      });
    }

    const unknownIds = ['999999', '9007199254740993', '9223372036854775807'];
    for (const petId of unknownIds) {
      test(`when no pet has id ${petId}, then 404 not_found with the deprecation headers`, async () => {
        const res = await server.request('GET', `/v1/pets/${petId}`);
        assertError(res, 404, 'not_found', NOT_FOUND_MESSAGE);
        assertDeprecationHeaders(res);
      });
    }

    const invalidIds: { when: string; petId: string; message: string }[] = [
      { when: '0', petId: '0', message: 'petId must be at least 1' },
      { when: '-1', petId: '-1', message: 'petId must be at least 1' },
      { when: '-0', petId: '-0', message: 'petId must be at least 1' },
      { when: '-9223372036854775808', petId: '-9223372036854775808', message: 'petId must be at least 1' },
      {
        when: '9223372036854775808 (2^63)',
        petId: '9223372036854775808',
        message: 'petId must be at most 9223372036854775807',
      },
      {
        when: '99999999999999999999',
        petId: '99999999999999999999',
        message: 'petId must be at most 9223372036854775807',
      },
      { when: 'abc', petId: 'abc', message: 'petId must be an integer' },
      { when: '1.5', petId: '1.5', message: 'petId must be an integer' },
      { when: '1.0', petId: '1.0', message: 'petId must be an integer' },
      { when: '1e3', petId: '1e3', message: 'petId must be an integer' },
      { when: '0x10', petId: '0x10', message: 'petId must be an integer' },
      { when: '01 (leading zero)', petId: '01', message: 'petId must be an integer' },
      { when: '+1', petId: '%2B1', message: 'petId must be an integer' },
      { when: '" 1" (leading space)', petId: '%201', message: 'petId must be an integer' },
      { when: '"1 " (trailing space)', petId: '1%20', message: 'petId must be an integer' },
      { when: 'a full-width digit one', petId: '%EF%BC%91', message: 'petId must be an integer' },
      { when: 'empty', petId: '', message: 'petId must be an integer' },
      { when: '41 digits long', petId: '1'.repeat(41), message: 'petId must be an integer' },
      { when: '600 digits long', petId: '1'.repeat(600), message: 'petId must be an integer' },
    ];
    for (const { when, petId, message } of invalidIds) {
      test(`when petId is ${when}, then 400 invalid_request naming petId, with the deprecation headers`, async () => {
        const res = await server.request('GET', `/v1/pets/${petId}`);
        assertError(res, 400, 'invalid_request', message);
        assertDeprecationHeaders(res);
      });
    }

    const unauthorized: {
      when: string;
      key: string | null;
      petId: () => string;
      message: string;
      challenge: string;
    }[] = [
      {
        when: 'no API key is sent',
        key: null,
        petId: () => String(rex.id),
        message: 'an API key is required: send "Authorization: Bearer <key>"',
        challenge: 'Bearer realm="animal-store"',
      },
      {
        when: 'an unknown API key is sent',
        key: 'pst_not-a-real-key-0123456789',
        petId: () => String(rex.id),
        message: 'the API key is not valid',
        challenge: 'Bearer realm="animal-store", error="invalid_token"',
      },
      {
        when: 'no API key is sent and petId is invalid (authentication comes first)',
        key: null,
        petId: () => 'abc',
        message: 'an API key is required: send "Authorization: Bearer <key>"',
        challenge: 'Bearer realm="animal-store"',
      },
    ];
    for (const { when, key, petId, message, challenge } of unauthorized) {
      test(`when ${when}, then 401 unauthorized with the deprecation headers`, async () => {
        const res = await server.request('GET', `/v1/pets/${petId()}`, { key });
        assertError(res, 401, 'unauthorized', message);
        assert.equal(res.headers.get('www-authenticate'), challenge);
        assertDeprecationHeaders(res);
      });
    }

    test('when the pet is fetched with HEAD, then 200 with the deprecation headers and no body', async () => {
      const res = await rawRequest(server, 'HEAD', `/v1/pets/${rex.id}`);
      assert.equal(res.status, 200);
      assert.equal(res.text, '');
      assertDeprecationHeaders(res);
    });
  });

  backend.describe(`getPet around its sunset (${backend.name})`, () => {
    let server: TestServer;
    let clock = BEFORE_SUNSET;
    let rex: { id: number; text: string };
    before(async () => {
      server = await startTestServer({ backend, now: () => clock });
      rex = await create(server, '{"name":"Rex","categoryId":9223372036854775807}');
    });
    after(() => server.close());

    test('when the clock is 1 ms before the sunset, then 200 with the pet', async () => {
      clock = new Date(SUNSET_INSTANT - 1);
      const res = await server.request('GET', `/v1/pets/${rex.id}`);
      assert.equal(res.status, 200);
      assert.equal(res.text, rex.text);
      assertDeprecationHeaders(res);
    });

    const retiredClocks: { when: string; at: Date }[] = [
      { when: 'exactly at the sunset (2030-12-05T00:00:00Z)', at: new Date(SUNSET_INSTANT) },
      { when: '1 ms after the sunset', at: new Date(SUNSET_INSTANT + 1) },
      { when: 'years after the sunset', at: new Date('2040-01-01T00:00:00Z') },
    ];
    for (const { when, at } of retiredClocks) {
      test(`when the clock is ${when}, then 410 gone with the deprecation headers`, async () => {
        clock = at;
        const res = await server.request('GET', `/v1/pets/${rex.id}`);
        assertError(res, 410, 'gone', GONE_MESSAGE);
        assertDeprecationHeaders(res);
      });
    }

    const retiredIds: { when: string; petId: string }[] = [
      { when: 'the id is unknown', petId: '999999' },
      { when: 'the id is 2^63-1', petId: '9223372036854775807' },
      { when: 'petId is not an integer', petId: 'abc' },
      { when: 'petId is 0', petId: '0' },
    ];
    for (const { when, petId } of retiredIds) {
      test(`when the sunset has passed and ${when}, then 410 gone (the operation no longer exists)`, async () => {
        clock = new Date(SUNSET_INSTANT);
        const res = await server.request('GET', `/v1/pets/${petId}`);
        assertError(res, 410, 'gone', GONE_MESSAGE);
        assertDeprecationHeaders(res);
      });
    }

    test('when the sunset has passed, then the replacement, listPets, still answers without deprecation headers', async () => {
      clock = new Date(SUNSET_INSTANT);
      const list = await server.request('GET', '/v1/pets');
      assert.equal(list.status, 200);
      assert.equal(list.text, `[${rex.text}]`);
      assert.equal(list.headers.get('deprecation'), null);
      assert.equal(list.headers.get('sunset'), null);
    });
  });

  backend.describe(`getPet with PUBLIC_BASE_URL set (${backend.name})`, () => {
    let server: TestServer;
    let rex: { id: number; text: string };
    before(async () => {
      server = await startTestServer({
        backend,
        now: () => BEFORE_SUNSET,
        env: { PUBLIC_BASE_URL: 'https://api.example.com/v1' },
      });
      rex = await create(server, '{"name":"Rex","categoryId":1}');
    });
    after(() => server.close());

    test('when the pet exists, then 200 carries the absolute deprecation Link', async () => {
      const res = await server.request('GET', `/v1/pets/${rex.id}`);
      assert.equal(res.status, 200);
      assert.equal(res.text, rex.text);
      assertDeprecationHeaders(res, ABSOLUTE_DOCS_LINK);
    });

    test('when no pet has the id, then 404 carries the absolute deprecation Link', async () => {
      const res = await server.request('GET', '/v1/pets/999999');
      assertError(res, 404, 'not_found', NOT_FOUND_MESSAGE);
      assertDeprecationHeaders(res, ABSOLUTE_DOCS_LINK);
    });
  });
}
