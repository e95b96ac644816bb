import assert from 'node:assert/strict';
import { API_KEY_SCOPES, type ApiKeyScope, newApiKey } from '../../src/domain/api-keys.js';
import { after, before, httpLayerBackends, test } from '../support/backends.js';
import { startTestServer, type TestResponse, type TestServer } from '../support/test-server.js';

/** A request to one operation: `valid` is answered as the operation does, `invalid` has a wrong shape. */
interface Call {
  method: string;
  path: string;
  body?: unknown;
}

interface OperationCase {
  operationId: string;
  scope: ApiKeyScope;
  /** What the operation answers to `valid()` for a key that has the scope. */
  success: number;
  valid: () => Call;
  /** Would be a 400 (or 404) with the scope: without it, 403 all the same. */
  invalid: Call;
}

const challenge = (scope: ApiKeyScope) =>
  `Bearer realm="animal-store", error="insufficient_scope", scope="${scope}"`;

/** Exactly DECISIONS.md's 403: the Error body naming the missing scope, and the RFC 6750 §3.1 challenge. */
function assertForbidden(res: TestResponse, scope: ApiKeyScope, what: string): void {
  assert.equal(res.status, 403, `${what}: ${res.text}`);
  assert.equal(res.headers.get('www-authenticate'), challenge(scope), what);
  assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
  assert.deepEqual(
    res.json(),
    {
      code: 'forbidden',
      message: `this API key does not have the scope ${scope}, which this operation needs`,
      status: 403,
    },
    what,
  );
}

for (const backend of httpLayerBackends) {
  backend.describe(`scopes on every operation (${backend.name})`, () => {
    let server: TestServer;
    /** One key per scope, each with that scope alone. */
    const keys = new Map<ApiKeyScope, string>();
    /** An animal, one available to order, and placed orders to deliver and to cancel, made with the test key. */
    let petId: number;
    let available: number;
    let toDeliver: number;
    let toCancel: number;

    before(async () => {
      server = await startTestServer({ backend });
      for (const scope of API_KEY_SCOPES) {
        const key = newApiKey(`only ${scope}`, new Date(), { scopes: [scope] });
        await server.storage.apiKeys.insert(key.record);
        keys.set(scope, key.secret);
      }
      const pet = async () => {
        const res = await server.request('POST', '/v1/pets', { body: { name: 'Scoped', categoryId: 1 } });
        assert.equal(res.status, 201, res.text);
        return res.json<{ id: number }>().id;
      };
      const order = async () => {
        const res = await server.request('POST', '/v1/store/orders', { body: { petId: await pet() } });
        assert.equal(res.status, 201, res.text);
        return res.json<{ id: number }>().id;
      };
      petId = await pet();
      available = await pet();
      toDeliver = await order();
      toCancel = await order();
    });
    after(() => server.close());

    const operations: OperationCase[] = [
      {
        operationId: 'listPets',
        scope: 'pets:read',
        success: 200,
        valid: () => ({ method: 'GET', path: '/v1/pets?limit=5' }),
        invalid: { method: 'GET', path: '/v1/pets?limit=0&status=lost' },
      },
      {
        operationId: 'createPet',
        scope: 'pets:write',
        success: 201,
        valid: () => ({ method: 'POST', path: '/v1/pets', body: { name: 'Allowed', categoryId: 2 } }),
        invalid: { method: 'POST', path: '/v1/pets', body: { name: 7, id: 'x' } },
      },
      {
        operationId: 'getPet',
        scope: 'pets:read',
        success: 200,
        valid: () => ({ method: 'GET', path: `/v1/pets/${petId}` }),
        invalid: { method: 'GET', path: '/v1/pets/abc' },
      },
      {
        operationId: 'listOrders',
        scope: 'orders:read',
        success: 200,
        valid: () => ({ method: 'GET', path: '/v1/store/orders?limit=5' }),
        invalid: { method: 'GET', path: '/v1/store/orders?petId=x' },
      },
      {
        operationId: 'placeOrder',
        scope: 'orders:write',
        success: 201,
        valid: () => ({ method: 'POST', path: '/v1/store/orders', body: { petId: available } }),
        invalid: { method: 'POST', path: '/v1/store/orders', body: { petId: 'one', extra: true } },
      },
      {
        operationId: 'getOrder',
        scope: 'orders:read',
        success: 200,
        valid: () => ({ method: 'GET', path: `/v1/store/orders/${toDeliver}` }),
        invalid: { method: 'GET', path: '/v1/store/orders/999999999' },
      },
      {
        operationId: 'deliverOrder',
        scope: 'orders:write',
        success: 200,
        valid: () => ({ method: 'POST', path: `/v1/store/orders/${toDeliver}/deliver` }),
        invalid: { method: 'POST', path: '/v1/store/orders/abc/deliver', body: { now: true } },
      },
      {
        operationId: 'cancelOrder',
        scope: 'orders:write',
        success: 200,
        valid: () => ({ method: 'POST', path: `/v1/store/orders/${toCancel}/cancel` }),
        invalid: { method: 'POST', path: '/v1/store/orders/abc/cancel' },
      },
    ];

    test('when the table is read, then it covers every /v1 operation of the OpenAPI document, with the scope it documents', async () => {
      const doc = (await server.request('GET', '/v1/openapi.json', { key: null })).json<{ paths: object }>();
      const documented: [string, unknown][] = [];
      for (const [path, item] of Object.entries(doc.paths as Record<string, object>)) {
        if (!path.startsWith('/pets') && !path.startsWith('/store')) continue;
        for (const operation of Object.values(item) as { operationId: string; security: unknown }[])
          documented.push([operation.operationId, operation.security]);
      }
      assert.deepEqual(
        documented.sort(),
        operations.map((o): [string, unknown] => [o.operationId, [{ bearerAuth: [o.scope] }]]).sort(),
      );
    });

    for (const operation of operations) {
      for (const scope of API_KEY_SCOPES) {
        const allowed = scope === operation.scope;
        test(`when ${operation.operationId} is called with a key that has only ${scope}, then ${allowed ? `it answers ${operation.success}` : `403 insufficient_scope naming ${operation.scope}, whatever the request's shape`}`, async () => {
          const key = keys.get(scope) as string;
          if (allowed) {
            const { method, path, body } = operation.valid();
            const res = await server.request(method, path, { key, ...(body === undefined ? {} : { body }) });
            assert.equal(res.status, operation.success, res.text);
            assert.equal(res.headers.get('www-authenticate'), null);
            return;
          }
          for (const [what, call] of [
            ['valid', operation.valid()],
            ['invalid', operation.invalid],
          ] as const) {
            const { method, path, body } = call;
            const res = await server.request(method, path, { key, ...(body === undefined ? {} : { body }) });
            assertForbidden(res, operation.scope, `${what} ${method} ${path}`);
          }
        });
      }
    }

    test('when a key without pets:read asks HEAD /v1/pets, then 403 with the challenge and no body', async () => {
      const res = await server.request('HEAD', '/v1/pets', { key: keys.get('orders:read') as string });
      assert.equal(res.status, 403);
      assert.equal(res.headers.get('www-authenticate'), challenge('pets:read'));
      assert.equal(res.text, '');
    });

    test('when a key without pets:write sends a body that is not JSON, or too large, then 403 rather than 415 or 413', async () => {
      const key = keys.get('pets:read') as string;
      const text = await server.request('POST', '/v1/pets', {
        key,
        body: 'Rex',
        headers: { 'content-type': 'text/plain' },
      });
      assertForbidden(text, 'pets:write', 'text/plain');
      const large = await server.request('POST', '/v1/pets', {
        key,
        body: JSON.stringify({ name: 'x'.repeat(70 * 1024), categoryId: 1 }),
      });
      assertForbidden(large, 'pets:write', 'too large');
    });

    test('when a scoped key asks for an unknown path or a wrong method, then 404 or 405 as for any key', async () => {
      const key = keys.get('orders:read') as string;
      assert.equal((await server.request('GET', '/v1/nothing', { key })).status, 404);
      const wrong = await server.request('DELETE', '/v1/pets', { key });
      assert.equal(wrong.status, 405);
      assert.equal(wrong.headers.get('allow'), 'GET, HEAD, POST');
    });

    test('when the test key (from PETSTORE_API_KEYS) is used, then it has every scope', async () => {
      for (const operation of operations.filter((o) => o.success === 200 && o.valid().method === 'GET')) {
        const { method, path } = operation.valid();
        assert.equal((await server.request(method, path)).status, 200, operation.operationId);
      }
      assert.equal(
        (await server.request('POST', '/v1/pets', { body: { name: 'Env', categoryId: 3 } })).status,
        201,
      );
    });
  });
}
