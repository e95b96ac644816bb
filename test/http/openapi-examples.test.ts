import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { ERROR_STATUS, type ErrorCode } from '../../src/http/schemas/error.js';
import { sqlite } from '../support/backends.js';
import { CONTRACT_FORMATS } from '../support/openapi-contract.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

type Json = Record<string, unknown>;
interface ErrorExample {
  code: ErrorCode;
  message: string;
  status: number;
}
interface Media {
  schema: Json;
  example?: unknown;
  examples?: Record<string, { value: unknown }>;
}
interface Response {
  content?: Record<string, Media>;
}
type Operations = Record<
  string,
  Record<string, { operationId: string; responses: Record<string, Response> }>
>;

const ERROR_REF = '#/components/schemas/Error';
const pointerKey = (key: string) => key.replaceAll('~', '~0').replaceAll('/', '~1');

/** Every example in the document, with the JSON pointer of the schema it must match. */
function examples(node: unknown, pointer = ''): { value: unknown; schema: string; at: string }[] {
  if (node === null || typeof node !== 'object') return [];
  const found: { value: unknown; schema: string; at: string }[] = [];
  const object = node as Json;
  // A schema's own `examples` (OpenAPI 3.1 is JSON Schema 2020-12): an array.
  if (Array.isArray(object.examples))
    for (const value of object.examples) found.push({ value, schema: pointer, at: `${pointer}/examples` });
  // A media type's or a parameter's: `example`, or named `examples`, beside the `schema`.
  if (object.schema !== undefined) {
    if ('example' in object) found.push({ value: object.example, schema: `${pointer}/schema`, at: pointer });
    if (object.examples && !Array.isArray(object.examples))
      for (const [name, example] of Object.entries(object.examples as Record<string, { value: unknown }>))
        found.push({ value: example.value, schema: `${pointer}/schema`, at: `${pointer}/examples/${name}` });
  }
  for (const [key, value] of Object.entries(object))
    found.push(...examples(value, `${pointer}/${pointerKey(key)}`));
  return found;
}

/** The Error examples of one documented response. */
function errorExamples(media: Media): ErrorExample[] {
  if (media.example !== undefined) return [media.example as ErrorExample];
  return Object.values(media.examples ?? {}).map((example) => example.value as ErrorExample);
}

describe('OpenAPI examples', () => {
  let server: TestServer;
  let doc: Json;
  before(async () => {
    server = await startTestServer({ backend: sqlite });
    doc = (await server.request('GET', '/v1/openapi.json', { key: null })).json<Json>();
  });
  after(() => server.close());

  const operations = () => doc.paths as Operations;

  test('when every example in the document is checked against its schema, then each one matches', () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true, formats: CONTRACT_FORMATS });
    ajv.addSchema(doc, 'openapi');
    const all = examples(doc);
    assert.ok(all.length >= 30, `only ${all.length} examples`);
    for (const { value, schema, at } of all) {
      const validate = ajv.compile({ $ref: `openapi#${schema}` });
      assert.ok(validate(value), `${at}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`);
    }
  });

  test('when the responses are read, then every one has an example, and every error example carries its own status and that status code', () => {
    for (const [path, item] of Object.entries(operations())) {
      for (const [method, { operationId, responses }] of Object.entries(item)) {
        const listed = Object.keys(responses).filter((key) => key !== 'default');
        for (const [key, response] of Object.entries(responses)) {
          for (const [type, media] of Object.entries(response.content ?? {})) {
            const where = `${operationId} ${key} ${type}`;
            const ref = media.schema.$ref as string | undefined;
            const component = ref
              ? ((doc.components as Json).schemas as Json)[ref.split('/').at(-1) as string]
              : undefined;
            assert.ok(
              media.example !== undefined || media.examples || (component as Json | undefined)?.examples,
              `${where} (${method.toUpperCase()} ${path}) has no example`,
            );
            if (ref !== ERROR_REF) continue;
            const bodies = errorExamples(media);
            assert.ok(bodies.length > 0, `${where}: an error example of its own, not the Error schema's`);
            for (const body of bodies) {
              assert.equal(
                ERROR_STATUS[body.code],
                body.status,
                `${where}: ${body.code} travels with its status`,
              );
              if (key === 'default')
                assert.ok(!listed.includes(String(body.status)), `${where}: ${body.status}`);
              else assert.equal(body.status, Number(key), `${where}: status`);
            }
          }
        }
      }
    }
  });

  /** The documented Error example of one operation's response for `code`. */
  function documented(operationId: string, status: string, code: ErrorCode): ErrorExample {
    for (const item of Object.values(operations()))
      for (const operation of Object.values(item))
        if (operation.operationId === operationId) {
          const media = operation.responses[status]?.content?.['application/json'] as Media;
          const example = errorExamples(media).find((body) => body.code === code);
          assert.ok(example, `${operationId} ${status} documents ${code}`);
          return example;
        }
    throw new Error(`no operation ${operationId}`);
  }

  const big = JSON.stringify({ name: 'x'.repeat(70_000), categoryId: 1 });
  for (const [operationId, status, code, method, path, options] of [
    ['listPets', '400', 'invalid_request', 'GET', '/v1/pets?limit=101', {}],
    ['createPet', '400', 'invalid_request', 'POST', '/v1/pets', { body: '{"name":"Rex","categoryId":"1"}' }],
    ['getPet', '400', 'invalid_request', 'GET', '/v1/pets/abc', {}],
    ['listPets', '401', 'unauthorized', 'GET', '/v1/pets', { key: null }],
    [
      'createPet',
      '401',
      'unauthorized',
      'POST',
      '/v1/pets',
      { key: null, body: { name: 'Rex', categoryId: 1 } },
    ],
    ['getPet', '401', 'unauthorized', 'GET', '/v1/pets/1', { key: null }],
    ['getPet', '404', 'not_found', 'GET', '/v1/pets/999999', {}],
    ['createPet', '413', 'payload_too_large', 'POST', '/v1/pets', { body: big }],
    [
      'createPet',
      '415',
      'unsupported_media_type',
      'POST',
      '/v1/pets',
      { headers: { 'content-type': 'text/plain' }, body: 'Rex' },
    ],
    ['listPets', 'default', 'method_not_allowed', 'DELETE', '/v1/pets', {}],
    ['createPet', 'default', 'method_not_allowed', 'DELETE', '/v1/pets', {}],
    ['getPet', 'default', 'method_not_allowed', 'DELETE', '/v1/pets/1', {}],
    ['listOrders', '400', 'invalid_request', 'GET', '/v1/store/orders?petId=x', {}],
    ['placeOrder', '400', 'invalid_request', 'POST', '/v1/store/orders', { body: { petId: 987654321 } }],
    ['getOrder', '400', 'invalid_request', 'GET', '/v1/store/orders/abc', {}],
    ['deliverOrder', '400', 'invalid_request', 'POST', '/v1/store/orders/abc/deliver', {}],
    ['cancelOrder', '400', 'invalid_request', 'POST', '/v1/store/orders/abc/cancel', {}],
    ['placeOrder', '401', 'unauthorized', 'POST', '/v1/store/orders', { key: null, body: { petId: 1 } }],
    ['getOrder', '404', 'not_found', 'GET', '/v1/store/orders/999999', {}],
    ['deliverOrder', '404', 'not_found', 'POST', '/v1/store/orders/999999/deliver', {}],
    ['cancelOrder', '404', 'not_found', 'POST', '/v1/store/orders/999999/cancel', {}],
    [
      'placeOrder',
      '413',
      'payload_too_large',
      'POST',
      '/v1/store/orders',
      { body: JSON.stringify({ petId: 1, pad: 'x'.repeat(70_000) }) },
    ],
    [
      'placeOrder',
      '415',
      'unsupported_media_type',
      'POST',
      '/v1/store/orders',
      { headers: { 'content-type': 'text/plain' }, body: '1' },
    ],
    ['listOrders', 'default', 'method_not_allowed', 'DELETE', '/v1/store/orders', {}],
    ['getOrder', 'default', 'method_not_allowed', 'DELETE', '/v1/store/orders/1', {}],
    ['deliverOrder', 'default', 'method_not_allowed', 'DELETE', '/v1/store/orders/1/deliver', {}],
    ['cancelOrder', 'default', 'method_not_allowed', 'DELETE', '/v1/store/orders/1/cancel', {}],
  ] as const) {
    test(`when ${method} ${path.slice(0, 40)} is refused with ${code}, then the answer is the ${operationId} ${status} example`, async () => {
      const res = await server.request(method, path, options);
      assert.deepEqual(res.json(), documented(operationId, status, code));
    });
  }

  test('when an Idempotency-Key is reused with another body, then the answer is the createPet 422 example', async () => {
    const send = (categoryId: number) =>
      server.request('POST', '/v1/pets', {
        body: { name: 'Rex', categoryId },
        headers: { 'Idempotency-Key': 'example-test' },
      });
    assert.equal((await send(1)).status, 201);
    assert.deepEqual((await send(2)).json(), documented('createPet', '422', 'idempotency_key_reused'));
  });

  test("when the Store refuses a move with 409, or a reused Idempotency-Key with 422, then each answer is its operation's example", async () => {
    const animal = async (status: string) =>
      (await server.request('POST', '/v1/pets', { body: { name: 'Rex', categoryId: 1, status } })).json<{
        id: number;
      }>().id;
    const place = async (petId: number, headers = {}) =>
      server.request('POST', '/v1/store/orders', { body: { petId }, headers });
    assert.deepEqual(
      (await place(await animal('pending'))).json(),
      documented('placeOrder', '409', 'conflict'),
    );
    const cancelled = (await place(await animal('available'))).json<{ id: number }>().id;
    await server.request('POST', `/v1/store/orders/${cancelled}/cancel`);
    assert.deepEqual(
      (await server.request('POST', `/v1/store/orders/${cancelled}/deliver`)).json(),
      documented('deliverOrder', '409', 'conflict'),
    );
    const delivered = (await place(await animal('available'))).json<{ id: number }>().id;
    await server.request('POST', `/v1/store/orders/${delivered}/deliver`);
    assert.deepEqual(
      (await server.request('POST', `/v1/store/orders/${delivered}/cancel`)).json(),
      documented('cancelOrder', '409', 'conflict'),
    );
    const key = { 'Idempotency-Key': 'order-example-test' };
    assert.equal((await place(await animal('available'), key)).status, 201);
    assert.deepEqual(
      (await place(await animal('available'), key)).json(),
      documented('placeOrder', '422', 'idempotency_key_reused'),
    );
  });

  test('when getPet is asked past its sunset, then the answer is the getPet 410 example', async (t) => {
    const retired = await startTestServer({ backend: sqlite, now: () => new Date('2031-01-01T00:00:00Z') });
    t.after(() => retired.close());
    assert.deepEqual(
      (await retired.request('GET', '/v1/pets/1')).json(),
      documented('getPet', '410', 'gone'),
    );
  });

  test('when a key is throttled, then the answer is the 429 example, with the limits the service was started with', async (t) => {
    const limited = await startTestServer({
      backend: sqlite,
      env: { RATE_LIMIT_PER_SECOND: '0.01', RATE_LIMIT_BURST: '1' },
    });
    t.after(() => limited.close());
    await limited.request('GET', '/v1/pets');
    const body = (await limited.request('GET', '/v1/pets')).json<ErrorExample>();
    // The example states the default limits (200 at once, 100 per second); this server has its own.
    const example = documented('listPets', '429', 'rate_limited');
    assert.deepEqual(
      { ...body, message: body.message.replace('at most 1 at once and 0.01 per second', '…') },
      { ...example, message: example.message.replace('at most 200 at once and 100 per second', '…') },
    );
  });
});
