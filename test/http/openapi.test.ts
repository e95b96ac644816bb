import assert from 'node:assert/strict';
import { Validator } from '@seriousme/openapi-schema-validator';
import { ERROR_STATUS } from '../../src/http/schemas/error.js';
import { after, before, httpLayerBackends, test } from '../support/backends.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

type Json = Record<string, unknown>;

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema: Json;
}

interface Response {
  description: string;
  headers?: Record<string, unknown>;
  content?: Record<string, { schema: Json }>;
}

interface Operation {
  operationId: string;
  tags?: string[];
  requestBody?: Json;
  deprecated?: boolean;
  description?: string;
  security?: unknown[];
  parameters?: Parameter[];
  responses: Record<string, Response>;
}

interface Found {
  path: string;
  method: string;
  operation: Operation;
}

async function fetchDocument(server: TestServer): Promise<Json> {
  const res = await server.request('GET', '/v1/openapi.json', { key: null });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
  return res.json<Json>();
}

function operations(doc: Json): Found[] {
  const found: Found[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
    for (const [method, operation] of Object.entries(item)) found.push({ path, method, operation });
  }
  return found;
}

function operation(doc: Json, operationId: string): Found {
  const matches = operations(doc).filter((found) => found.operation.operationId === operationId);
  assert.equal(matches.length, 1, `exactly one operation ${operationId}`);
  return matches[0] as Found;
}

/** Every `$ref` value in the document. */
function refs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const item of node) refs(item, out);
  else if (node !== null && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') out.push(value);
      else refs(value, out);
    }
  }
  return out;
}

function resolvePointer(doc: Json, ref: string): unknown {
  assert.ok(ref.startsWith('#/'), `${ref} is a local reference`);
  let node: unknown = doc;
  for (const raw of ref.slice(2).split('/')) {
    const key = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    assert.ok(node !== null && typeof node === 'object' && key in node, `${ref} does not resolve`);
    node = (node as Json)[key];
  }
  return node;
}

const PET_OPERATIONS = ['listPets', 'createPet', 'getPet'];
const STORE_OPERATIONS = ['listOrders', 'placeOrder', 'getOrder', 'deliverOrder', 'cancelOrder'];

const statusCodes = (op: Operation) =>
  Object.keys(op.responses)
    .filter((key) => key !== 'default')
    .sort();

for (const backend of httpLayerBackends) {
  backend.describe(`OpenAPI document (${backend.name})`, () => {
    let server: TestServer;
    let doc: Json;
    before(async () => {
      server = await startTestServer({ backend });
      doc = await fetchDocument(server);
    });
    after(() => server.close());

    test('when the document is validated, then it is valid OpenAPI 3.1', async () => {
      assert.match(String(doc.openapi), /^3\.1\.\d+$/);
      const validator = new Validator();
      const result = await validator.validate(structuredClone(doc));
      assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
      assert.equal(validator.version, '3.1');
    });

    test('when every $ref is followed, then each resolves inside the document', () => {
      const all = refs(doc);
      assert.ok(all.length > 0);
      for (const ref of all) assert.notEqual(resolvePointer(doc, ref), undefined, ref);
    });

    test('when no base addresses are configured, then servers is only the relative /v1', () => {
      const servers = doc.servers as { url: string; description?: string }[];
      assert.equal(servers.length, 1);
      assert.equal(servers[0]?.url, '/v1');
    });

    test('when the security is read, then a bearer scheme applies to every operation, each naming the one scope it needs', () => {
      const schemes = (doc.components as Json).securitySchemes as Record<string, Json>;
      const bearer = Object.entries(schemes).filter(
        ([, scheme]) => scheme.type === 'http' && String(scheme.scheme).toLowerCase() === 'bearer',
      );
      assert.equal(bearer.length, 1);
      const [name] = bearer[0] as [string, Json];
      assert.deepEqual(doc.security, [{ [name]: [] }]);
      for (const id of [...PET_OPERATIONS, ...STORE_OPERATIONS]) {
        const { operation: op, method } = operation(doc, id);
        // DECISIONS.md: GET needs its group's :read, the others its :write (OpenAPI 3.1 allows role names).
        const scope = `${STORE_OPERATIONS.includes(id) ? 'orders' : 'pets'}:${method === 'get' ? 'read' : 'write'}`;
        assert.deepEqual(op.security, [{ [name]: [scope] }], `${id} needs ${scope}`);
        assert.ok(
          String(op.description).endsWith(
            `Needs an API key with the scope \`${scope}\`; without it, \`403 forbidden\`.`,
          ),
          `${id}'s description names its scope: ${op.description}`,
        );
        assert.match(
          String((op.responses['403']?.headers?.['WWW-Authenticate'] as Json | undefined)?.description),
          new RegExp(`error="insufficient_scope", scope="${scope}"`),
        );
        assert.equal(
          (op.responses['403']?.content?.['application/json'] as { example?: { message?: string } })?.example
            ?.message,
          `this API key does not have the scope ${scope}, which this operation needs`,
        );
        assert.deepEqual(op.responses['401']?.content?.['application/json']?.schema, {
          $ref: '#/components/schemas/Error',
        });
        assert.ok(op.responses['401']?.headers?.['WWW-Authenticate'], `${id} documents WWW-Authenticate`);
      }
    });

    test('when the key-free endpoints are read, then openapi.json, healthz and readyz need no key', () => {
      for (const id of ['openapi', 'health', 'ready']) {
        assert.deepEqual(operation(doc, id).operation.security, [], `${id} has security []`);
      }
    });

    test('when getPet is read, then it is marked deprecated and the others are not', () => {
      assert.equal(operation(doc, 'getPet').operation.deprecated, true);
      assert.notEqual(operation(doc, 'listPets').operation.deprecated, true);
      assert.notEqual(operation(doc, 'createPet').operation.deprecated, true);
    });

    test('when createPet is read, then it documents the Content-Encoding request header and Accept-Encoding on its 415', () => {
      const { operation: op } = operation(doc, 'createPet');
      const coding = op.parameters?.find((p) => p.in === 'header' && p.name === 'content-encoding');
      assert.ok(coding, 'a content-encoding header parameter');
      assert.equal(coding.schema.type, 'string');
      assert.match(String(coding.description), /`gzip`, `deflate` or `br`/);
      assert.ok(op.responses['415']?.headers?.['Accept-Encoding'], '415 documents Accept-Encoding');
      assert.ok(op.responses['413'], '413 documented');
    });

    test('when the Error schema is read, then its code enum is exactly the keys of ERROR_STATUS', () => {
      const schemas = (doc.components as Json).schemas as Record<string, Json>;
      const error = schemas.Error as { required: string[]; properties: Record<string, Json> };
      assert.ok(error, 'components.schemas.Error exists');
      const codes = error.properties.code?.enum as string[];
      assert.deepEqual([...codes].sort(), Object.keys(ERROR_STATUS).sort());
      assert.equal(codes.length, new Set(codes).size);
      assert.deepEqual([...error.required].sort(), ['code', 'message', 'status']);
      assert.deepEqual(Object.keys(error.properties).sort(), ['code', 'message', 'status']);
    });

    for (const [id, method, path, codes] of [
      ['listPets', 'get', '/pets', ['200', '304', '400', '401', '403', '429', '503']],
      ['createPet', 'post', '/pets', ['201', '400', '401', '403', '413', '415', '422', '429', '503']],
      ['getPet', 'get', '/pets/{petId}', ['200', '304', '400', '401', '403', '404', '410', '429', '503']],
      ['listOrders', 'get', '/store/orders', ['200', '304', '400', '401', '403', '429', '503']],
      [
        'placeOrder',
        'post',
        '/store/orders',
        ['201', '400', '401', '403', '409', '413', '415', '422', '429', '503'],
      ],
      [
        'getOrder',
        'get',
        '/store/orders/{orderId}',
        ['200', '304', '400', '401', '403', '404', '429', '503'],
      ],
      [
        'deliverOrder',
        'post',
        '/store/orders/{orderId}/deliver',
        ['200', '400', '401', '403', '404', '409', '429', '503'],
      ],
      [
        'cancelOrder',
        'post',
        '/store/orders/{orderId}/cancel',
        ['200', '400', '401', '403', '404', '409', '429', '503'],
      ],
    ] as const) {
      test(`when ${id} is read, then it is ${method.toUpperCase()} ${path} with status codes ${codes.join(', ')}`, () => {
        const found = operation(doc, id);
        assert.equal(found.method, method);
        assert.equal(found.path, path);
        assert.deepEqual(statusCodes(found.operation), [...codes].sort());
        for (const code of codes.filter((c) => Number(c) >= 400)) {
          assert.deepEqual(
            found.operation.responses[code]?.content?.['application/json']?.schema,
            { $ref: '#/components/schemas/Error' },
            `${id} ${code} is an Error`,
          );
        }
      });
    }

    test('when the success bodies are read, then listPets returns an array of Pet and createPet and getPet a Pet', () => {
      const body = (id: string, code: string) =>
        operation(doc, id).operation.responses[code]?.content?.['application/json']?.schema;
      const list = body('listPets', '200') as Json;
      assert.equal(list.type, 'array');
      assert.deepEqual(list.items, { $ref: '#/components/schemas/Pet' });
      assert.deepEqual(body('createPet', '201'), { $ref: '#/components/schemas/Pet' });
      assert.deepEqual(body('getPet', '200'), { $ref: '#/components/schemas/Pet' });
    });

    test('when the limits are read, then every /v1 operation documents 429 with Retry-After and the RateLimit fields, and 503 with Retry-After', () => {
      for (const id of [...PET_OPERATIONS, ...STORE_OPERATIONS]) {
        const { responses } = operation(doc, id).operation;
        assert.deepEqual(
          Object.keys(responses['429']?.headers ?? {}).sort(),
          ['RateLimit', 'RateLimit-Policy', 'Retry-After'],
          `${id} 429 headers`,
        );
        assert.deepEqual(Object.keys(responses['503']?.headers ?? {}), ['Retry-After'], `${id} 503 headers`);
      }
    });

    test('when createPet is read, then it documents the optional Idempotency-Key header and its 422', () => {
      const op = operation(doc, 'createPet').operation;
      const header = op.parameters?.find(
        (p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key',
      );
      assert.ok(header, 'createPet has an Idempotency-Key header parameter');
      assert.notEqual(header.required, true);
      assert.equal(header.schema.maxLength, 255);
      assert.match(op.responses['422']?.description ?? '', /idempotency_key_reused/);
    });

    test('when the response headers are read, then Link, Location and the deprecation headers are documented', () => {
      assert.ok(operation(doc, 'listPets').operation.responses['200']?.headers?.Link);
      assert.ok(operation(doc, 'createPet').operation.responses['201']?.headers?.Location);
      const getPet = operation(doc, 'getPet').operation;
      for (const code of ['200', '404', '410']) {
        assert.deepEqual(
          Object.keys(getPet.responses[code]?.headers ?? {}).sort(),
          code === '200'
            ? ['Cache-Control', 'Deprecation', 'ETag', 'Link', 'Sunset']
            : ['Deprecation', 'Link', 'Sunset'],
          `getPet ${code} headers`,
        );
      }
    });

    test('when the limit parameter is read, then it is an optional query integer from 1 to 100 defaulting to 20', () => {
      const params = operation(doc, 'listPets').operation.parameters ?? [];
      const limit = params.find((p) => p.name === 'limit');
      assert.ok(limit);
      assert.equal(limit.in, 'query');
      assert.notEqual(limit.required, true);
      assert.equal(limit.schema.type, 'integer');
      assert.equal(limit.schema.minimum, 1);
      assert.equal(limit.schema.maximum, 100);
      assert.equal(limit.schema.default, 20);
    });

    test('when the id parameter of listPets and listOrders is read, then it is an optional repeated query list of 1 to 100 int64 ids of at least 1, and getPet names GET /v1/pets?id= as its replacement', () => {
      for (const list of ['listPets', 'listOrders']) {
        const id = (operation(doc, list).operation.parameters ?? []).find((p) => p.name === 'id');
        assert.ok(id, list);
        assert.equal(id.in, 'query');
        assert.notEqual(id.required, true);
        assert.equal(id.schema.type, 'array');
        assert.equal(id.schema.minItems, 1);
        assert.equal(id.schema.maxItems, 100);
        assert.deepEqual(
          { ...(id.schema.items as Json), description: undefined },
          { type: 'integer', format: 'int64', minimum: 1, description: undefined },
        );
        assert.match(String(id.description), /repeat the parameter \(`\?id=3&id=17`\), up to 100 times/);
      }
      const getPet = operation(doc, 'getPet').operation;
      assert.match(String(getPet.description), /^Deprecated: use `GET \/v1\/pets\?id=…`/);
      assert.match(
        String((getPet.responses['200']?.headers?.Link as Json | undefined)?.description),
        /the replacement, `GET \/v1\/pets\?id=…`/,
      );
    });

    test('when the status parameter is read, then it is an optional query PetStatus', () => {
      const params = operation(doc, 'listPets').operation.parameters ?? [];
      const status = params.find((p) => p.name === 'status');
      assert.ok(status);
      assert.equal(status.in, 'query');
      assert.notEqual(status.required, true);
      const schema = (
        status.schema.$ref ? resolvePointer(doc, status.schema.$ref as string) : status.schema
      ) as Json;
      assert.deepEqual(schema.enum, ['available', 'pending', 'sold']);
    });

    test('when the petId parameter is read, then it is a required int64 path parameter of at least 1', () => {
      const params = operation(doc, 'getPet').operation.parameters ?? [];
      const petId = params.find((p) => p.name === 'petId');
      assert.ok(petId);
      assert.equal(petId.in, 'path');
      assert.equal(petId.required, true);
      assert.equal(petId.schema.type, 'integer');
      assert.equal(petId.schema.format, 'int64');
      assert.equal(petId.schema.minimum, 1);
    });

    test('when the tags are read, then the Store operations are tagged store, the animal operations pets, and both tags are described', () => {
      const tags = doc.tags as { name: string; description?: string }[];
      for (const name of ['pets', 'store']) {
        assert.ok(tags.find((tag) => tag.name === name)?.description, `tag ${name} is described`);
      }
      for (const id of PET_OPERATIONS) assert.deepEqual(operation(doc, id).operation.tags, ['pets']);
      for (const id of STORE_OPERATIONS) assert.deepEqual(operation(doc, id).operation.tags, ['store']);
    });

    test('when the Order and OrderStatus schemas are read, then all four fields are required, nothing else is allowed, ids are int64 and placedAt a date-time', () => {
      const schemas = (doc.components as Json).schemas as Record<string, Json>;
      const order = schemas.Order as {
        required: string[];
        properties: Record<string, Json>;
        additionalProperties: boolean;
      };
      assert.deepEqual([...order.required].sort(), ['id', 'petId', 'placedAt', 'status']);
      assert.deepEqual(Object.keys(order.properties).sort(), ['id', 'petId', 'placedAt', 'status']);
      assert.equal(order.additionalProperties, false);
      for (const field of ['id', 'petId']) {
        assert.deepEqual(
          [order.properties[field]?.type, order.properties[field]?.format],
          ['integer', 'int64'],
        );
      }
      assert.deepEqual(
        [order.properties.placedAt?.type, order.properties.placedAt?.format],
        ['string', 'date-time'],
      );
      assert.deepEqual(order.properties.status, { $ref: '#/components/schemas/OrderStatus' });
      assert.deepEqual(schemas.OrderStatus?.enum, ['placed', 'delivered', 'cancelled']);
      const newOrder = schemas.NewOrder as Json;
      assert.deepEqual(newOrder.required, ['petId']);
      assert.deepEqual(Object.keys(newOrder.properties as Json), ['petId']);
      assert.equal(newOrder.additionalProperties, false);
      const body = (id: string, code: string) =>
        operation(doc, id).operation.responses[code]?.content?.['application/json']?.schema;
      assert.deepEqual(body('placeOrder', '201'), { $ref: '#/components/schemas/Order' });
      assert.deepEqual(body('getOrder', '200'), { $ref: '#/components/schemas/Order' });
      assert.deepEqual(body('deliverOrder', '200'), { $ref: '#/components/schemas/Order' });
      assert.deepEqual(body('cancelOrder', '200'), { $ref: '#/components/schemas/Order' });
      assert.deepEqual((body('listOrders', '200') as Json).items, { $ref: '#/components/schemas/Order' });
    });

    test('when the Store operations are read, then placeOrder documents Idempotency-Key, Location and Idempotent-Replayed, listOrders its Link and parameters', () => {
      const place = operation(doc, 'placeOrder').operation;
      assert.ok(place.parameters?.find((p) => p.in === 'header' && p.name === 'idempotency-key'));
      assert.deepEqual(Object.keys(place.responses['201']?.headers ?? {}).sort(), [
        'Idempotent-Replayed',
        'Location',
      ]);
      const list = operation(doc, 'listOrders').operation;
      assert.ok(list.responses['200']?.headers?.Link);
      assert.deepEqual(
        (list.parameters ?? []).map((p) => [p.name, p.in, p.required ?? false]),
        [
          ['limit', 'query', false],
          ['status', 'query', false],
          ['petId', 'query', false],
          ['id', 'query', false],
          ['cursor', 'query', false],
          ['if-none-match', 'header', false],
        ],
      );
      for (const id of ['getOrder', 'deliverOrder', 'cancelOrder']) {
        const orderId = operation(doc, id).operation.parameters?.find((p) => p.name === 'orderId');
        assert.deepEqual(
          [orderId?.in, orderId?.required, orderId?.schema.format, orderId?.schema.minimum],
          ['path', true, 'int64', 1],
        );
      }
      for (const id of ['deliverOrder', 'cancelOrder']) {
        assert.equal(operation(doc, id).operation.requestBody, undefined, `${id} takes no body`);
      }
    });

    test('when the NewPet schema is read, then name and categoryId are required and nothing else is allowed', () => {
      const schemas = (doc.components as Json).schemas as Record<string, Json>;
      const newPet = schemas.NewPet as Json;
      assert.deepEqual([...(newPet.required as string[])].sort(), ['categoryId', 'name']);
      assert.equal(newPet.additionalProperties, false);
      assert.deepEqual(Object.keys(newPet.properties as Json).sort(), ['categoryId', 'name', 'status']);
      const body = operation(doc, 'createPet').operation as Operation & { requestBody?: Json };
      assert.equal(body.requestBody?.required, true);
    });
  });

  backend.describe(`OpenAPI servers with base addresses (${backend.name})`, () => {
    test('when PUBLIC_BASE_URL and STAGING_BASE_URL are set, then servers lists /v1, production, staging in that order', async () => {
      const server = await startTestServer({
        backend,
        env: {
          PUBLIC_BASE_URL: 'https://api.example.com/v1',
          STAGING_BASE_URL: 'https://staging.example.com/v1',
        },
      });
      try {
        const doc = await fetchDocument(server);
        const servers = doc.servers as { url: string }[];
        assert.deepEqual(
          servers.map((s) => s.url),
          ['/v1', 'https://api.example.com/v1', 'https://staging.example.com/v1'],
        );
        const result = await new Validator().validate(structuredClone(doc));
        assert.equal(result.valid, true, JSON.stringify(result.errors));
      } finally {
        await server.close();
      }
    });

    test('when only PUBLIC_BASE_URL is set, then servers lists /v1 then production', async () => {
      const server = await startTestServer({
        backend,
        env: { PUBLIC_BASE_URL: 'https://api.example.com/v1/' },
      });
      try {
        const doc = await fetchDocument(server);
        assert.deepEqual(
          (doc.servers as { url: string }[]).map((s) => s.url),
          ['/v1', 'https://api.example.com/v1'],
        );
      } finally {
        await server.close();
      }
    });
  });
}
