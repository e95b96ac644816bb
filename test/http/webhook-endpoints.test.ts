import assert from 'node:assert/strict';
import { newApiKey } from '../../src/domain/api-keys.js';
import { after, backends, before, test } from '../support/backends.js';
import { queryDatabase } from '../support/db-inspect.js';
import { assertError } from '../support/error-body.js';
import { walkLinks } from '../support/paging.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

/**
 * Webhook endpoints through HTTP: create (the secret shown once), list, get, delete, enable, rotate, and
 * their refusals: a 400 naming the field, nothing stored. Literal private addresses are refused at
 * creation; this server allows no network beyond the public ones.
 */

interface EndpointBody {
  id: number;
  url: string;
  types: string[];
  description: string;
  status: string;
  disabledReason?: string;
  createdAt: string;
  secret?: string;
}

const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;
/** Every operation on one endpoint, as a method and what follows /v1/webhook-endpoints/{id}. */
const ON_ONE_ENDPOINT = [
  ['GET', ''],
  ['DELETE', ''],
  ['PATCH', ''],
  ['POST', '/enable'],
  ['POST', '/rotate-secret'],
  ['GET', '/deliveries'],
] as const;

for (const backend of backends) {
  backend.describe(`webhook endpoints (${backend.name})`, () => {
    let server: TestServer;
    const now = new Date('2026-11-26T12:00:00.000Z');
    before(async () => {
      server = await startTestServer({ backend, now: () => now });
    });
    after(() => server.close());

    const create = (body: unknown) => server.request('POST', '/v1/webhook-endpoints', { body });
    const endpointRows = async () =>
      (await queryDatabase(server.database.url, 'SELECT id FROM webhook_endpoints')).length;

    test('when one key creates an endpoint, then another key with the scopes lists, changes and deletes it: one store, one tenant', async () => {
      const scopes = ['webhooks:read', 'webhooks:write'] as const;
      const alice = newApiKey('alice', now, { scopes });
      const bob = newApiKey('bob', now, { scopes });
      for (const key of [alice, bob]) await server.storage.apiKeys.insert(key.record);
      const made = await server.request('POST', '/v1/webhook-endpoints', {
        key: alice.secret,
        body: { url: 'https://hooks.example.com/alice' },
      });
      assert.equal(made.status, 201, made.text);
      const { id } = made.json<EndpointBody>();
      const seen = await server.request('GET', '/v1/webhook-endpoints?limit=100', { key: bob.secret });
      assert.ok(seen.json<EndpointBody[]>().some((endpoint) => endpoint.id === id));
      const rotated = await server.request('POST', `/v1/webhook-endpoints/${id}/rotate-secret`, {
        key: bob.secret,
      });
      assert.equal(rotated.status, 200, rotated.text);
      const gone = await server.request('DELETE', `/v1/webhook-endpoints/${id}`, { key: bob.secret });
      assert.equal(gone.status, 204);
      assert.equal(
        (await server.request('GET', `/v1/webhook-endpoints/${id}`, { key: alice.secret })).status,
        404,
      );
    });

    test('when an endpoint is created with only a url, then 201 with every field, types ["*"], description "", a whsec_ secret of 32 bytes, and Location', async () => {
      const res = await create({ url: 'https://hooks.example.com/a' });
      assert.equal(res.status, 201, res.text);
      const body = res.json<EndpointBody>();
      assert.deepEqual(Object.keys(body), [
        'id',
        'url',
        'types',
        'description',
        'rateLimit',
        'status',
        'createdAt',
        'lastSuccessAt',
        'failingSince',
        'secret',
      ]);
      assert.deepEqual(
        { ...body, id: 0, secret: '' },
        {
          id: 0,
          url: 'https://hooks.example.com/a',
          types: ['*'],
          description: '',
          rateLimit: null,
          status: 'enabled',
          createdAt: '2026-11-26T12:00:00.000Z',
          lastSuccessAt: null,
          failingSince: null,
          secret: '',
        },
      );
      assert.match(body.secret as string, SECRET);
      assert.equal(Buffer.from((body.secret as string).slice(6), 'base64').length, 32);
      assert.equal(res.headers.get('location'), `/v1/webhook-endpoints/${body.id}`);
      // Shown only once: get and list never show it.
      const got = await server.request('GET', `/v1/webhook-endpoints/${body.id}`);
      assert.equal(got.status, 200);
      const { secret: _shownOnce, ...withoutSecret } = body;
      assert.deepEqual(got.json(), withoutSecret);
      const listed = await walkLinks('/v1/webhook-endpoints?limit=1', (path) => server.request('GET', path));
      const all = listed.flatMap((page) => page.json<EndpointBody[]>());
      assert.ok(all.some((e) => e.id === body.id));
      assert.ok(
        all.every((e) => e.secret === undefined),
        'no secret listed',
      );
      assert.ok(!got.text.includes(body.secret as string));
    });

    test('when types and a description are given, then they are kept (duplicates once); and types must be known event types or ["*"]', async () => {
      const res = await create({
        url: 'http://hooks.example.com/b?x=1',
        types: ['order.placed', 'order.cancelled', 'order.placed'],
        description: 'Fulfilment',
      });
      assert.equal(res.status, 201, res.text);
      assert.deepEqual(res.json<EndpointBody>().types, ['order.placed', 'order.cancelled']);
      assert.equal(res.json<EndpointBody>().description, 'Fulfilment');
    });

    test('when the body is invalid, then 400 naming the field, and nothing is stored', async () => {
      const before = await endpointRows();
      const cases: [unknown, string][] = [
        [{}, 'url'],
        [{ url: '' }, 'url'],
        [{ url: 'hooks.example.com/x' }, 'url'],
        [{ url: '/relative' }, 'url'],
        [{ url: 'ftp://hooks.example.com/x' }, 'url'],
        [{ url: 'javascript:alert(1)' }, 'url'],
        [{ url: 'https://user:pw@hooks.example.com/x' }, 'url'],
        [{ url: 'https://hooks.example.com/x#frag' }, 'url'],
        [{ url: `https://hooks.example.com/${'a'.repeat(2049 - 26)}` }, 'url'],
        [{ url: 42 }, 'url'],
        [{ url: 'https://hooks.example.com', types: [] }, 'types'],
        [{ url: 'https://hooks.example.com', types: ['pet.deleted'] }, 'types'],
        [{ url: 'https://hooks.example.com', types: ['*', 'pet.created'] }, 'types'],
        [{ url: 'https://hooks.example.com', types: 'pet.created' }, 'types'],
        [{ url: 'https://hooks.example.com', description: 'x'.repeat(256) }, 'description'],
        [{ url: 'https://hooks.example.com', description: 7 }, 'description'],
        [{ url: 'https://hooks.example.com', secret: 'whsec_mine' }, 'secret'],
        [{ url: 'https://hooks.example.com', status: 'disabled' }, 'status'],
        [{ url: 'https://hooks.example.com', rateLimit: 0 }, 'rateLimit'],
        [{ url: 'https://hooks.example.com', rateLimit: -5 }, 'rateLimit'],
        [{ url: 'https://hooks.example.com', rateLimit: 10_001 }, 'rateLimit'],
        [{ url: 'https://hooks.example.com', rateLimit: 2.5 }, 'rateLimit'],
        [{ url: 'https://hooks.example.com', rateLimit: '20' }, 'rateLimit'],
      ];
      for (const [body, field] of cases)
        assertError(
          await create(body),
          400,
          'invalid_request',
          { names: [field] },
          JSON.stringify(body).slice(0, 80),
        );
      assertError(
        await server.request('POST', '/v1/webhook-endpoints', { body: '{"url":' }),
        400,
        'invalid_request',
      );
      assert.equal(await endpointRows(), before, 'nothing stored');
      // 2,048 characters exactly is fine.
      const longest = `https://hooks.example.com/${'a'.repeat(2048 - 26)}`;
      assert.equal(longest.length, 2048);
      assert.equal((await create({ url: longest })).status, 201);
    });

    test('when an endpoint is patched (JSON Merge Patch), then each field named changes, null restores its default, the rest and the secret are kept; application/json is taken too', async () => {
      const made = await create({
        url: 'https://hooks.example.com/before',
        types: ['order.placed'],
        description: 'Before',
        rateLimit: 10_000,
      });
      assert.equal(made.status, 201, made.text);
      const { secret, ...original } = made.json<EndpointBody & { rateLimit: number | null }>();
      assert.equal(original.rateLimit, 10_000);
      const path = `/v1/webhook-endpoints/${original.id}`;
      const patch = (body: unknown, type = 'application/merge-patch+json') =>
        server.request('PATCH', path, {
          body: typeof body === 'string' ? body : JSON.stringify(body),
          headers: { 'content-type': type },
        });
      const storedSecret = async () =>
        (
          await queryDatabase<{ secret: string }>(
            server.database.url,
            `SELECT secret FROM webhook_endpoints WHERE id = ${original.id}`,
          )
        )[0]?.secret;

      const described = await patch({ description: 'After', rateLimit: 20 });
      assert.equal(described.status, 200, described.text);
      assert.deepEqual(described.json(), { ...original, description: 'After', rateLimit: 20 });
      assert.equal(described.text.includes('whsec_'), false, 'no secret in the answer');
      const moved = await patch(
        { url: 'https://hooks.example.com/after', types: ['pet.created', 'order.cancelled'] },
        'application/json',
      );
      assert.equal(moved.status, 200, moved.text);
      const expected = {
        ...original,
        url: 'https://hooks.example.com/after',
        types: ['pet.created', 'order.cancelled'],
        description: 'After',
        rateLimit: 20,
      };
      assert.deepEqual(moved.json(), expected);
      assert.deepEqual((await patch({})).json(), expected, '{} changes nothing');
      const defaults = await patch({ types: null, description: null, rateLimit: null });
      assert.deepEqual(defaults.json(), { ...expected, types: ['*'], description: '', rateLimit: null });
      assert.deepEqual((await server.request('GET', path)).json(), defaults.json());
      assert.equal(await storedSecret(), secret, 'the secret is kept');

      // Refusals: 400 naming the field, and nothing changed.
      const cases: [unknown, string][] = [
        [{ url: 'https://10.0.0.1/hook' }, 'url'],
        [{ url: 'http://[::1]/hook' }, 'url'],
        [{ url: 'ftp://hooks.example.com/x' }, 'url'],
        [{ url: null }, 'url'],
        [{ types: [] }, 'types'],
        [{ types: ['pet.deleted'] }, 'types'],
        [{ description: 'x'.repeat(256) }, 'description'],
        [{ rateLimit: 0 }, 'rateLimit'],
        [{ rateLimit: -1 }, 'rateLimit'],
        [{ rateLimit: 10_001 }, 'rateLimit'],
        [{ rateLimit: 1.5 }, 'rateLimit'],
        [{ secret: 'whsec_mine' }, 'secret'],
        [{ status: 'disabled' }, 'status'],
        [{ description: 'ok', colour: 'red' }, 'colour'],
      ];
      for (const [body, field] of cases)
        assertError(await patch(body), 400, 'invalid_request', { names: [field] }, JSON.stringify(body));
      assertError(await patch('{"url":'), 400, 'invalid_request');
      assertError(await patch('[]'), 400, 'invalid_request');
      assertError(await patch({ description: 'x' }, 'text/plain'), 415, 'unsupported_media_type');
      assert.deepEqual((await server.request('GET', path)).json(), defaults.json(), 'nothing changed');
      assert.equal(await storedSecret(), secret);
      // Merge patch is PATCH's: a create sent as one is refused.
      assertError(
        await server.request('POST', '/v1/webhook-endpoints', {
          body: JSON.stringify({ url: 'https://hooks.example.com/merge' }),
          headers: { 'content-type': 'application/merge-patch+json' },
        }),
        415,
        'unsupported_media_type',
      );
      assertError(
        await server.request('PATCH', '/v1/webhook-endpoints/999999', {
          body: '{}',
          headers: { 'content-type': 'application/merge-patch+json' },
        }),
        404,
        'not_found',
      );
    });

    test('when the url is a literal private, loopback, link-local, CGNAT, unique-local, multicast, unspecified or IPv4-mapped address, then 400 naming url without resolution details, nothing stored', async () => {
      const before = await endpointRows();
      for (const host of [
        '127.0.0.1',
        '127.1.2.3',
        '10.0.0.8',
        '172.16.5.4',
        '192.168.1.1',
        '169.254.169.254',
        '100.64.0.1',
        '0.0.0.0',
        '224.0.0.1',
        '[::1]',
        '[::]',
        '[fe80::1]',
        '[fd00::1]',
        '[::ffff:127.0.0.1]',
        '[::ffff:a9fe:a9fe]',
        '[ff02::1]',
      ]) {
        const res = await create({ url: `http://${host}/hook` });
        assertError(
          res,
          400,
          'invalid_request',
          'url must not point to a private, loopback, link-local or otherwise non-public address',
          host,
        );
      }
      assert.equal(await endpointRows(), before);
      // A public literal address is fine.
      assert.equal((await create({ url: 'http://93.184.215.14/hook' })).status, 201);
    });

    test('when an endpoint is rotated, then 200 with a new secret; enable answers 200; delete answers 204 and then 404 everywhere', async () => {
      const created = (await create({ url: 'https://hooks.example.com/rotate' })).json<EndpointBody>();
      const rotated = await server.request('POST', `/v1/webhook-endpoints/${created.id}/rotate-secret`);
      assert.equal(rotated.status, 200);
      const body = rotated.json<EndpointBody>();
      assert.match(body.secret as string, SECRET);
      assert.notEqual(body.secret, created.secret);
      assert.deepEqual({ ...body, secret: created.secret }, created);
      const [stored] = await queryDatabase<{ previous_secret: string }>(
        server.database.url,
        `SELECT previous_secret FROM webhook_endpoints WHERE id = ${created.id}`,
      );
      assert.equal(stored?.previous_secret, created.secret, 'the previous secret still signs for 24 hours');
      const enabled = await server.request('POST', `/v1/webhook-endpoints/${created.id}/enable`);
      assert.equal(enabled.status, 200);
      assert.equal(enabled.json<EndpointBody>().status, 'enabled');
      assertError(
        await server.request('POST', `/v1/webhook-endpoints/${created.id}/enable`, {
          body: { please: true },
        }),
        400,
        'invalid_request',
        'this operation takes no request body',
      );
      const deleted = await server.request('DELETE', `/v1/webhook-endpoints/${created.id}`);
      assert.equal(deleted.status, 204);
      assert.equal(deleted.text, '');
      for (const [method, path] of ON_ONE_ENDPOINT)
        assertError(
          await server.request(
            method,
            `/v1/webhook-endpoints/${created.id}${path}`,
            method === 'PATCH' ? { body: {} } : {},
          ),
          404,
          'not_found',
          'no webhook endpoint has this id',
          `${method} ${path}`,
        );
      assertError(
        await server.request('POST', `/v1/webhook-endpoints/${created.id}/deliveries/1/retry`),
        404,
        'not_found',
        'this webhook endpoint has no delivery of this event',
      );
    });

    test('when ids are not integers from 1 to 2^63-1, then 400 naming them', async () => {
      for (const id of ['0', 'abc', '-1', '9223372036854775808', '1.5'])
        for (const [method, suffix] of ON_ONE_ENDPOINT)
          assertError(
            await server.request(
              method,
              `/v1/webhook-endpoints/${id}${suffix}`,
              method === 'PATCH' ? { body: {} } : {},
            ),
            400,
            'invalid_request',
            { names: ['endpointId'] },
            `${method} ${id}${suffix}`,
          );
      assertError(
        await server.request('POST', '/v1/webhook-endpoints/1/deliveries/x/retry'),
        400,
        'invalid_request',
        { names: ['eventId'] },
      );
      for (const query of ['limit=0', 'limit=101', 'cursor=x', 'foo=1'])
        assertError(
          await server.request('GET', `/v1/webhook-endpoints?${query}`),
          400,
          'invalid_request',
          undefined,
          query,
        );
      assertError(
        await server.request('GET', '/v1/webhook-endpoints/1/deliveries?status=lost'),
        400,
        'invalid_request',
        { names: ['status'] },
      );
    });

    test('when a key has webhooks:read only, then it lists and gets but may not create, delete, enable, rotate or retry (403 naming webhooks:write)', async () => {
      const reader = newApiKey('reader', now, { scopes: ['webhooks:read'] });
      await server.storage.apiKeys.insert(reader.record);
      const created = (await create({ url: 'https://hooks.example.com/scoped' })).json<EndpointBody>();
      assert.equal(
        (await server.request('GET', '/v1/webhook-endpoints', { key: reader.secret })).status,
        200,
      );
      assert.equal(
        (await server.request('GET', `/v1/webhook-endpoints/${created.id}`, { key: reader.secret })).status,
        200,
      );
      for (const [method, path] of [
        ['POST', '/v1/webhook-endpoints'],
        ['DELETE', `/v1/webhook-endpoints/${created.id}`],
        ['PATCH', `/v1/webhook-endpoints/${created.id}`],
        ['POST', `/v1/webhook-endpoints/${created.id}/enable`],
        ['POST', `/v1/webhook-endpoints/${created.id}/rotate-secret`],
        ['POST', `/v1/webhook-endpoints/${created.id}/deliveries/1/retry`],
      ] as const)
        assertError(
          await server.request(method, path, { key: reader.secret }),
          403,
          'forbidden',
          'this API key does not have the scope webhooks:write, which this operation needs',
        );
      const none = newApiKey('pets only', now, { scopes: ['pets:read'] });
      await server.storage.apiKeys.insert(none.record);
      assertError(
        await server.request('GET', '/v1/webhook-endpoints', { key: none.secret }),
        403,
        'forbidden',
        'this API key does not have the scope webhooks:read, which this operation needs',
      );
    });
  });
}
