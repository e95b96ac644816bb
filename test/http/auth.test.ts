import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { hashApiKey, newApiKey } from '../../src/domain/api-keys.js';
import { after, backends, before, test } from '../support/backends.js';
import { startTestServer, TEST_KEY, type TestResponse, type TestServer } from '../support/test-server.js';

const REALM = 'Bearer realm="animal-store"';
const INVALID_TOKEN = 'Bearer realm="animal-store", error="invalid_token"';

/** A 401 with exactly this challenge and exactly the Error body {code: 'unauthorized', message, status: 401}. */
function assertUnauthorized(res: TestResponse, challenge: string): void {
  assert.equal(res.status, 401, res.text);
  assert.equal(res.headers.get('www-authenticate'), challenge);
  assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
  const body = res.json<Record<string, unknown>>();
  assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'status']);
  assert.equal(body.code, 'unauthorized');
  assert.equal(body.status, 401);
  assert.equal(typeof body.message, 'string');
  assert.ok((body.message as string).length > 0, 'the message is not empty');
}

/** Sends a raw Authorization header (or none). */
const withAuthorization = (server: TestServer, value: string | null, path = '/v1/pets') =>
  server.request(
    'GET',
    path,
    value === null ? { key: null } : { key: null, headers: { authorization: value } },
  );

for (const backend of backends) {
  backend.describe(`authentication (${backend.name})`, () => {
    let server: TestServer;
    let petId: number;
    before(async () => {
      server = await startTestServer({ backend });
      const created = await server.request('POST', '/v1/pets', { body: { name: 'Rex', categoryId: 1 } });
      assert.equal(created.status, 201);
      petId = created.json<{ id: number }>().id;
    });
    after(() => server.close());

    for (const [method, path] of [
      ['GET', '/v1/pets'],
      ['GET', '/v1/pets/1'],
      ['POST', '/v1/pets'],
    ] as const) {
      test(`when ${method} ${path} has no Authorization header, then 401 unauthorized with the bare Bearer challenge`, async () => {
        const res = await server.request(method, path, {
          key: null,
          ...(method === 'POST' ? { body: { name: 'Rex', categoryId: 1 } } : {}),
        });
        assertUnauthorized(res, REALM);
      });
    }

    test('when the scheme is not Bearer (Basic abc), then 401 without an error parameter', async () => {
      assertUnauthorized(await withAuthorization(server, 'Basic abc'), REALM);
    });

    test('when the bearer token is unknown, then 401 with error="invalid_token"', async () => {
      assertUnauthorized(
        await withAuthorization(server, 'Bearer pst_thisIsNotAKeyOfThisService'),
        INVALID_TOKEN,
      );
    });

    test('when the token is a known key with one character changed, then 401 with error="invalid_token"', async () => {
      const altered = `${TEST_KEY.slice(0, -1)}${TEST_KEY.endsWith('f') ? 'e' : 'f'}`;
      assertUnauthorized(await withAuthorization(server, `Bearer ${altered}`), INVALID_TOKEN);
    });

    for (const malformed of ['Bearer', 'Bearer a b', `Bearer ${TEST_KEY} extra`, 'Bearer "quoted"']) {
      test(`when the Authorization header is malformed (${malformed.replace(TEST_KEY, '<key>')}), then 401 with error="invalid_token"`, async () => {
        assertUnauthorized(await withAuthorization(server, malformed), INVALID_TOKEN);
      });
    }

    for (const scheme of ['bearer', 'BEARER', 'Bearer', 'bEaReR']) {
      test(`when the scheme is written "${scheme}", then the key is accepted`, async () => {
        const res = await withAuthorization(server, `${scheme} ${TEST_KEY}`);
        assert.equal(res.status, 200, res.text);
        assert.ok(Array.isArray(res.json()));
      });
    }

    test('when a key created in storage is sent, then it works, and once revoked it is refused at once', async () => {
      const key = newApiKey('auth test', new Date());
      assert.match(key.secret, /^pst_/);
      await server.storage.apiKeys.insert(key.record);

      const ok = await server.request('GET', `/v1/pets/${petId}`, { key: key.secret });
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.json<{ id: number }>().id, petId);
      const created = await server.request('POST', '/v1/pets', {
        key: key.secret,
        body: { name: 'Stored key', categoryId: 2 },
      });
      assert.equal(created.status, 201, created.text);

      assert.equal(await server.storage.apiKeys.revoke(key.record.id, new Date()), true);
      assertUnauthorized(await server.request('GET', '/v1/pets', { key: key.secret }), INVALID_TOKEN);
      assertUnauthorized(
        await server.request('POST', '/v1/pets', { key: key.secret, body: { name: 'Late', categoryId: 3 } }),
        INVALID_TOKEN,
      );
      // The other keys are untouched.
      assert.equal((await server.request('GET', '/v1/pets')).status, 200);
    });

    test('when an anonymous POST has an invalid body, then 401 rather than 400', async () => {
      const res = await server.request('POST', '/v1/pets', { key: null, body: { name: 7, id: 'x' } });
      assertUnauthorized(res, REALM);
    });

    test('when an anonymous POST has malformed JSON, then 401 rather than 400', async () => {
      const res = await server.request('POST', '/v1/pets', { key: null, body: '{"name": ' });
      assertUnauthorized(res, REALM);
    });

    test('when an anonymous POST is text/plain, then 401 rather than 415', async () => {
      const res = await server.request('POST', '/v1/pets', {
        key: null,
        body: 'hello',
        headers: { 'content-type': 'text/plain' },
      });
      assertUnauthorized(res, REALM);
    });

    test('when an anonymous POST body is over the size limit, then 401 rather than 413', async () => {
      const body = JSON.stringify({ name: 'x'.repeat(70 * 1024), categoryId: 1 });
      assert.ok(body.length > 64 * 1024);
      const res = await server.request('POST', '/v1/pets', { key: null, body });
      assertUnauthorized(res, REALM);
    });

    test('when an unknown key POSTs a body over the size limit, then 401 rather than 413', async () => {
      const body = JSON.stringify({ name: 'x'.repeat(70 * 1024), categoryId: 1 });
      const res = await server.request('POST', '/v1/pets', { key: 'pst_unknownKeyOfNobody', body });
      assertUnauthorized(res, INVALID_TOKEN);
    });

    test('when an anonymous GET asks for /v1/pets/abc, then 401 rather than 400', async () => {
      assertUnauthorized(await server.request('GET', '/v1/pets/abc', { key: null }), REALM);
    });

    test('when an anonymous GET has an invalid limit and status, then 401 rather than 400', async () => {
      assertUnauthorized(await server.request('GET', '/v1/pets?limit=0&status=x', { key: null }), REALM);
    });

    test('when an anonymous GET asks for a pet that does not exist, then 401 rather than 404', async () => {
      assertUnauthorized(await server.request('GET', '/v1/pets/999999', { key: null }), REALM);
    });

    for (const path of ['/v1/openapi.json', '/healthz', '/readyz']) {
      test(`when ${path} is requested without a key, then it answers 200`, async () => {
        const res = await server.request('GET', path, { key: null });
        assert.equal(res.status, 200, res.text);
        assert.equal(res.headers.get('www-authenticate'), null);
        assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
      });
    }

    test('when a key is inserted in storage, then the stored records hold only its hash, never the secret', async () => {
      const key = newApiKey('hash only', new Date());
      await server.storage.apiKeys.insert(key.record);
      const records = await server.storage.apiKeys.list();
      const stored = records.find((record) => record.id === key.record.id);
      assert.ok(stored, 'the key is listed');
      assert.equal(stored.hash, hashApiKey(key.secret));
      assert.match(stored.hash, /^[0-9a-f]{64}$/);
      assert.equal(stored.hint, key.secret.slice(-4));
      assert.equal(JSON.stringify(records).includes(key.secret), false);
      for (const record of records) {
        for (const value of Object.values(record)) {
          assert.notEqual(String(value), key.secret);
          assert.equal(String(value).includes(key.secret.slice(4)), false);
        }
      }
    });

    if (backend.name === 'sqlite') {
      test('when a key is inserted in SQLite, then the database files do not contain the secret', async () => {
        const key = newApiKey('file scan', new Date());
        await server.storage.apiKeys.insert(key.record);
        const path = server.database.url.slice('sqlite:'.length);
        const files = [path, `${path}-wal`].filter((file) => existsSync(file));
        assert.ok(files.length > 0);
        const contents = Buffer.concat(files.map((file) => readFileSync(file)));
        assert.ok(contents.includes(key.record.hash), 'the hash is stored');
        assert.equal(contents.includes(key.secret), false);
        assert.equal(contents.includes(key.secret.slice(4)), false);
      });
    }
  });

  backend.describe(`authentication with PETSTORE_API_KEYS (${backend.name})`, () => {
    const first = 'first-env-key-0123456789';
    const second = 'second-env-key-abcdefghij';
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ backend, env: { PETSTORE_API_KEYS: `  ${first} ,\t${second}  ` } });
    });
    after(() => server.close());

    for (const [label, key] of [
      ['first', first],
      ['second', second],
    ] as const) {
      test(`when the ${label} of the comma-separated keys is sent, then it is accepted`, async () => {
        const res = await server.request('GET', '/v1/pets', { key });
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.json(), []);
      });
    }

    test('when the whole comma-separated list is sent as one key, then it is refused', async () => {
      assertUnauthorized(await withAuthorization(server, `Bearer ${first},${second}`), INVALID_TOKEN);
    });

    test('when a key not in PETSTORE_API_KEYS is sent, then it is refused', async () => {
      assertUnauthorized(await server.request('GET', '/v1/pets', { key: TEST_KEY }), INVALID_TOKEN);
    });
  });
}
