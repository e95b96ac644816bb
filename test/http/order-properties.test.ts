import assert from 'node:assert/strict';
import fc from 'fast-check';
import { after, backends, before, test } from '../support/backends.js';
import { assertError } from '../support/error-body.js';
import {
  invalidParameters,
  type Json,
  objectBody,
  type Part,
  parameterPart,
  refusalMessage,
  resolve,
} from '../support/openapi-arbitraries.js';
import { walkLinks } from '../support/paging.js';
import { propertyRuns } from '../support/property-runs.js';
import { rawRequest } from '../support/raw-json.js';
import { startTestServer, type TestResponse, type TestServer } from '../support/test-server.js';

/**
 * Property-based tests of the Store, as test/http/properties.test.ts does for animals: requests
 * generated from the served OpenAPI document (the NewOrder schema, the orderId and listOrders
 * parameters), valid and invalid, mixed with requests naming the animals and orders that exist, against
 * the live server. Whatever is sent: never a 5xx; every response matches the document (rawRequest checks
 * each one); every refusal is an Error body; a refused request changes no order and no animal; an
 * accepted one does exactly what DECISIONS.md says, to the order and to its animal.
 */

const NUM_RUNS = propertyRuns(60);
const STATUS_BY_ORDER: Record<string, string> = {
  placed: 'pending',
  delivered: 'sold',
  cancelled: 'available',
};

/** An order with every value as text, so int64 values compare exactly. */
interface OrderText {
  id: string;
  petId: string;
  status: string;
  placedAt: string;
}

const asText = (order: Json): OrderText => ({
  id: String(order.id),
  petId: String(order.petId),
  status: order.status as string,
  placedAt: order.placedAt as string,
});

const ERROR_CODES: Record<number, string> = {
  400: 'invalid_request',
  404: 'not_found',
  409: 'conflict',
};

for (const backend of backends) {
  backend.describe(
    `properties of Store requests generated from the OpenAPI document (${backend.name})`,
    () => {
      let server: TestServer;
      let doc: Json;
      /** The animals as they must be: id → status. */
      const animals = new Map<string, string>();
      /** The orders as they must be, in id order. */
      const orders: OrderText[] = [];

      before(async () => {
        server = await startTestServer({ backend });
        doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as Json;
        const statuses = [...Array(30).fill('available'), 'pending', 'pending', 'sold', 'sold'];
        for (const [i, status] of statuses.entries()) {
          const res = await server.request('POST', '/v1/pets', {
            body: { name: `store ${i}`, categoryId: 1, status },
          });
          assert.equal(res.status, 201);
          animals.set(String(res.json<{ id: number }>().id), status);
        }
      });
      after(() => server.close());

      const operation = (path: string, method: string) =>
        ((doc.paths as Json)[path] as Record<string, Json>)[method] as Json;
      const parameter = (path: string, method: string, name: string) =>
        ((operation(path, method).parameters as Json[]).find((p) => p.name === name) as Json).schema as Json;

      async function walk<T>(first: string, read: (item: Json) => T): Promise<T[]> {
        const pages = await walkLinks(first, (path) => rawRequest(server, 'GET', path));
        return pages.flatMap((page) => page.exact<Json[]>().map(read));
      }

      /** What the service holds, orders and animals, compared with the model. */
      async function assertStoreIsModel(what: string): Promise<void> {
        assert.deepEqual(await walk('/v1/store/orders?limit=100', asText), orders, `orders after ${what}`);
        const stored = new Map(
          await walk('/v1/pets?limit=100', (pet) => [String(pet.id), pet.status as string] as const),
        );
        assert.deepEqual(stored, animals, `animals after ${what}`);
      }

      function assertRefusal(
        res: TestResponse,
        status: number,
        what: string,
        message?: Parameters<typeof assertError>[3],
      ): void {
        assertError(res, status, ERROR_CODES[status] as string, message, what);
      }

      const knownAnimal = () =>
        fc
          .constantFrom(...animals.keys())
          .map((id) => ({ text: `{"petId":${id}}`, valid: true, values: { petId: id }, offending: [] }));
      /** An animal that was not available from the start: nothing in these properties frees one. */
      const unavailableAnimal = () =>
        fc
          .constantFrom(...[...animals].filter(([, status]) => status !== 'available').map(([id]) => id))
          .map((id) => ({ text: `{"petId":${id}}`, valid: true, values: { petId: id }, offending: [] }));
      /** A valid id no animal has: the document's bodies mostly name small ids, which all exist. */
      const unknownAnimal = () =>
        fc.bigInt({ min: 1_000_000n, max: 2n ** 63n - 1n }).map((id) => ({
          text: `{"petId":${id}}`,
          valid: true,
          values: { petId: String(id) },
          offending: [],
        }));

      test('when any NewOrder body derived from the document, or one naming an animal that exists, is POSTed, then never a 5xx; a refusal is an Error body that changes nothing; a 201 is the order placed and its animal pending', async () => {
        const newOrder = (
          ((operation('/store/orders', 'post').requestBody as Json).content as Json)[
            'application/json'
          ] as Json
        ).schema as Json;
        const anyBody = objectBody(doc, newOrder);
        // Each outcome counted below has a source of its own, weighted so that in 100 runs every one
        // comes up far more than the 5 times asserted (a random mix of 60 once gave only 3 of one).
        const bodies = fc.oneof(
          { arbitrary: anyBody, weight: 3 },
          { arbitrary: anyBody.filter((body) => body.valid), weight: 1 },
          { arbitrary: unknownAnimal(), weight: 2 },
          { arbitrary: knownAnimal(), weight: 3 },
          { arbitrary: unavailableAnimal(), weight: 2 },
        );
        const seen = { placed: 0, unknown: 0, conflict: 0, invalid: 0 };
        await fc.assert(
          fc.asyncProperty(bodies, async (body) => {
            const res = await rawRequest(server, 'POST', '/v1/store/orders', {
              body: body.text,
              headers: { 'content-type': 'application/json' },
            });
            assert.ok(res.status < 500, `POST ${body.text} answered ${res.status}: ${res.text}`);
            const petId = body.values.petId as string;
            const animal = animals.get(petId);
            if (!body.valid) {
              seen.invalid++;
              assertRefusal(res, 400, body.text, refusalMessage(body));
            } else if (animal === undefined) {
              seen.unknown++;
              assertRefusal(res, 400, body.text);
              assert.equal(res.json<Json>().message, 'petId must be the id of an existing animal');
            } else if (animal !== 'available') {
              seen.conflict++;
              assertRefusal(res, 409, body.text);
              assert.equal(
                res.json<Json>().message,
                `the animal is ${animal}; only an available animal can be ordered`,
              );
            } else {
              seen.placed++;
              assert.equal(res.status, 201, `${body.text} → ${res.text}`);
              const order = asText(res.exact<Json>());
              assert.deepEqual(order, { id: order.id, petId, status: 'placed', placedAt: order.placedAt });
              assert.equal(res.headers.get('location'), `/v1/store/orders/${order.id}`);
              orders.push(order);
              animals.set(petId, 'pending');
            }
            await assertStoreIsModel(`POST ${body.text}`);
          }),
          // Enough for each outcome to be seen five times (asserted below).
          { numRuns: propertyRuns(100) },
        );
        assert.ok(
          Object.values(seen).every((n) => n >= 5),
          JSON.stringify(seen),
        );
      });

      test('when any orderId derived from the document, or one that exists, is asked for, delivered or cancelled, then never a 5xx: 200 or 404 or 409 as the order stands, 400 for an invalid id, and nothing changes but what a 200 move says', async () => {
        assert.ok(orders.length >= 5, 'the previous property placed orders');
        const schema = parameter('/store/orders/{orderId}', 'get', 'orderId');
        const ids = fc.oneof(
          // A few orders, asked about again and again: each is moved once, then retried or refused.
          fc
            .constantFrom(...orders.slice(0, 8).map((o) => o.id))
            .map((id): Part => ({ text: id, valid: true })),
          // An empty orderId would be another path, not this operation.
          parameterPart(doc, schema).filter((part) => part.text !== ''),
        );
        const moves = fc.constantFrom('get', 'deliver', 'cancel');
        const seen = { found: 0, moved: 0, unchanged: 0, conflict: 0, missing: 0, invalid: 0 };
        // Every branch at least twice whatever the random draws (they missed one now and then): two placed
        // orders each moved, asked again and moved the other way, read; unknown and invalid ids.
        const placed = orders.filter((o) => o.status === 'placed').slice(0, 2);
        const valid = (text: string): Part => ({ text, valid: true });
        const examples: [Part, 'get' | 'deliver' | 'cancel'][] = [
          ...placed.flatMap((o, i): [Part, 'get' | 'deliver' | 'cancel'][] => {
            const [move, other] =
              i === 0 ? (['deliver', 'cancel'] as const) : (['cancel', 'deliver'] as const);
            return [
              [valid(o.id), 'get'],
              [valid(o.id), move],
              [valid(o.id), move],
              [valid(o.id), other],
            ];
          }),
          [valid('999999999'), 'get'],
          [valid('999999998'), 'deliver'],
          [{ text: 'abc', valid: false }, 'get'],
          [{ text: '1.5', valid: false }, 'cancel'],
        ];
        await fc.assert(
          fc.asyncProperty(ids, moves, async (id, move) => {
            // A lone surrogate cannot be percent-encoded: it travels as U+FFFD, still not an integer.
            const segment = encodeURIComponent(Buffer.from(id.text).toString());
            const path =
              move === 'get' ? `/v1/store/orders/${segment}` : `/v1/store/orders/${segment}/${move}`;
            const res = await rawRequest(server, move === 'get' ? 'GET' : 'POST', path);
            assert.ok(res.status < 500, `${path} answered ${res.status}: ${res.text}`);
            const order = id.valid ? orders.find((o) => o.id === String(BigInt(id.text))) : undefined;
            if (!id.valid) {
              seen.invalid++;
              assertRefusal(res, 400, path, /^orderId must /);
            } else if (!order) {
              seen.missing++;
              assertRefusal(res, 404, path);
            } else if (move === 'get') {
              seen.found++;
              assert.equal(res.status, 200, res.text);
              assert.deepEqual(asText(res.exact<Json>()), order);
            } else {
              const to = move === 'deliver' ? 'delivered' : 'cancelled';
              if (order.status === 'placed' || order.status === to) {
                if (order.status === 'placed') seen.moved++;
                else seen.unchanged++;
                assert.equal(res.status, 200, `${path} → ${res.text}`);
                order.status = to;
                animals.set(order.petId, STATUS_BY_ORDER[to] as string);
                assert.deepEqual(asText(res.exact<Json>()), order);
              } else {
                seen.conflict++;
                assertRefusal(res, 409, path);
              }
            }
            await assertStoreIsModel(`${move} ${id.text}`);
          }),
          { numRuns: NUM_RUNS, examples },
        );
        assert.ok(
          Object.values(seen).every((n) => n >= 2),
          JSON.stringify(seen),
        );
      });

      test('when any listOrders query derived from the document is sent, then never a 5xx; a valid one returns exactly the matching orders and an invalid one a 400 that changes nothing', async () => {
        const param = (name: string) => parameter('/store/orders', 'get', name);
        const petIds = fc.oneof(
          fc.constantFrom(...animals.keys()).map((id): Part => ({ text: id, valid: true })),
          parameterPart(doc, param('petId')),
        );
        const anyQuery = fc.record({
          limit: fc.option(parameterPart(doc, param('limit')), { nil: undefined }),
          status: fc.option(parameterPart(doc, param('status')), { nil: undefined }),
          petId: fc.option(petIds, { nil: undefined }),
          // Any cursor a client makes up is invalid: only the service's own are accepted.
          cursor: fc.option(
            parameterPart(doc, param('cursor')).map((part) => ({ ...part, valid: false })),
            { freq: 6, nil: undefined },
          ),
        });
        const allValid = (q: Record<string, Part | undefined>) =>
          Object.values(q).every((part) => part === undefined || part.valid);
        const defaultLimit = Number((resolve(doc, param('limit')).default as number | undefined) ?? 20);
        let valid = 0;
        let invalid = 0;
        await fc.assert(
          fc.asyncProperty(fc.oneof(anyQuery, anyQuery.filter(allValid)), async (q) => {
            const search = new URLSearchParams();
            for (const [name, part] of Object.entries(q)) if (part) search.append(name, part.text);
            const path = `/v1/store/orders?${search}`;
            const res = await rawRequest(server, 'GET', path);
            assert.ok(res.status < 500, `${path} answered ${res.status}: ${res.text}`);
            if (allValid(q)) {
              valid++;
              assert.equal(res.status, 200, `${path} → ${res.text}`);
              const limit = q.limit ? Number(q.limit.text) : defaultLimit;
              const matching = orders.filter(
                (o) =>
                  (q.status === undefined || o.status === q.status.text) &&
                  (q.petId === undefined || o.petId === String(BigInt(q.petId.text))),
              );
              assert.deepEqual(res.exact<Json[]>().map(asText), matching.slice(0, limit));
              assert.equal(res.headers.get('link') !== null, matching.length > limit, `Link on ${path}`);
            } else {
              invalid++;
              assertRefusal(res, 400, path, { names: invalidParameters(q) });
            }
            await assertStoreIsModel(`GET ${path}`);
          }),
          { numRuns: NUM_RUNS },
        );
        assert.ok(valid > 10 && invalid > 10, `valid ${valid}, invalid ${invalid}`);
      });
    },
  );
}
