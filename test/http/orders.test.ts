import assert from 'node:assert/strict';
import { after, backends, before, test } from '../support/backends.js';
import { assertError } from '../support/error-body.js';
import { captureLog } from '../support/log-capture.js';
import { addAnimal, allOrders, animalStatus, type OrderBody, placeOrder } from '../support/orders.js';
import { cursorOf, nextHref, toPath } from '../support/paging.js';
import { rawRequest } from '../support/raw-json.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

/**
 * DECISIONS.md, "The Store: orders", through HTTP on the real server: each operation, its refusals, and
 * what it does to the animal. One server per backend; every test makes the animals it needs, so the
 * tests cannot see each other's orders except in lists, which they filter by their own animals.
 */

const JSON_UTF8 = 'application/json; charset=utf-8';
const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const NOT_AVAILABLE = (status: string) => `the animal is ${status}; only an available animal can be ordered`;
const UNKNOWN_PET = 'petId must be the id of an existing animal';

for (const backend of backends) {
  backend.describe(`the Store: orders (${backend.name})`, () => {
    let server: TestServer;
    /** The service's log lines, as JSON. */
    const { lines: logLines, logger } = captureLog('info');
    before(async () => {
      server = await startTestServer({ backend, logger });
    });
    after(() => server.close());

    const post = (path: string, body?: unknown, headers?: Record<string, string>) =>
      server.request('POST', path, {
        ...(body === undefined ? {} : { body }),
        ...(headers ? { headers } : {}),
      });
    const orderCount = async () => (await allOrders(server)).length;

    test('when an order is placed for an available animal, then 201 returns the placed Order with Location, and the animal is pending', async () => {
      const petId = await addAnimal(server);
      const before = Date.now();
      const res = await post('/v1/store/orders', { petId });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.headers.get('content-type'), JSON_UTF8);
      const order = res.json<OrderBody>();
      assert.deepEqual(Object.keys(order), ['id', 'petId', 'status', 'placedAt']);
      assert.deepEqual(order, { id: order.id, petId, status: 'placed', placedAt: order.placedAt });
      assert.match(order.placedAt, RFC3339_UTC);
      const placedAt = Date.parse(order.placedAt);
      assert.ok(placedAt >= before - 1000 && placedAt <= Date.now() + 1000, order.placedAt);
      assert.equal(res.headers.get('location'), `/v1/store/orders/${order.id}`);
      assert.equal(res.headers.get('idempotent-replayed'), null);

      const read = await server.request('GET', `/v1/store/orders/${order.id}`);
      assert.equal(read.status, 200);
      assert.equal(read.text, res.text);
      assert.equal(await animalStatus(server, petId), 'pending');
    });

    test('when an order is placed for an animal that does not exist, then 400 names petId and nothing is stored', async () => {
      const before = await orderCount();
      assertError(
        await post('/v1/store/orders', { petId: 987_654_321 }),
        400,
        'invalid_request',
        UNKNOWN_PET,
      );
      assert.equal(await orderCount(), before);
    });

    for (const status of ['pending', 'sold'] as const) {
      test(`when an order is placed for an animal created ${status}, then 409 conflict names its status and nothing changes`, async () => {
        const petId = await addAnimal(server, status);
        const before = await orderCount();
        assertError(await post('/v1/store/orders', { petId }), 409, 'conflict', NOT_AVAILABLE(status));
        assert.equal(await orderCount(), before);
        assert.equal(await animalStatus(server, petId), status);
      });
    }

    test('when a second order is placed for an animal already ordered, then 409 conflict names pending', async () => {
      const petId = await addAnimal(server);
      const first = await placeOrder(server, petId);
      assertError(await post('/v1/store/orders', { petId }), 409, 'conflict', NOT_AVAILABLE('pending'));
      assert.deepEqual(await allOrders(server, `&petId=${petId}`), [first]);
    });

    for (const [what, body, message] of [
      ['petId is missing', '{}', 'petId is required'],
      ['petId is a string', '{"petId":"1"}', 'petId must be an integer'],
      ['petId is 1.0', '{"petId":1.0}', 'petId must be an integer'],
      ['petId is 1e-400', '{"petId":1e-400}', 'petId must be an integer'],
      ['petId is 0', '{"petId":0}', 'petId must be at least 1'],
      ['petId is -1', '{"petId":-1}', 'petId must be at least 1'],
      ['petId is beyond int64', '{"petId":9223372036854775808}', 'petId must be at most 9223372036854775807'],
      ['petId is null', '{"petId":null}', 'petId must be an integer'],
      ['an unknown property is sent', '{"petId":1,"quantity":2}', 'quantity is not a known property'],
      ['an id is sent', '{"petId":1,"id":5}', 'id is not a known property'],
      ['a status is sent', '{"petId":1,"status":"delivered"}', 'status is not a known property'],
      ['the body is an array', '[{"petId":1}]', 'request body must be an object'],
      ['the body is not JSON', '{"petId":', 'request body is not valid JSON: '],
    ] as const) {
      test(`when ${what}, then 400 invalid_request says so and nothing is stored`, async () => {
        const before = await orderCount();
        const res = await post('/v1/store/orders', body);
        assert.equal(res.status, 400, res.text);
        const error = res.json<{ code: string; message: string }>();
        assert.equal(error.code, 'invalid_request');
        if (message.endsWith(': ')) assert.ok(error.message.startsWith(message), error.message);
        else assert.equal(error.message, message);
        assert.equal(await orderCount(), before);
      });
    }

    test('when the body is not JSON, then 415; when no key is sent with an invalid body, then 401 before anything else', async () => {
      const petId = await addAnimal(server);
      const before = await orderCount();
      assertError(
        await rawRequest(server, 'POST', '/v1/store/orders', {
          body: `petId=${petId}`,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        }),
        415,
        'unsupported_media_type',
        'request body must be application/json',
      );
      const anonymous = await server.request('POST', '/v1/store/orders', {
        body: '{"petId":"x"}',
        key: null,
      });
      assertError(
        anonymous,
        401,
        'unauthorized',
        'an API key is required: send "Authorization: Bearer <key>"',
      );
      assert.equal(anonymous.headers.get('www-authenticate'), 'Bearer realm="animal-store"');
      for (const [method, path] of [
        ['GET', '/v1/store/orders'],
        ['GET', '/v1/store/orders/1'],
        ['POST', '/v1/store/orders/1/deliver'],
        ['POST', '/v1/store/orders/1/cancel'],
      ] as const) {
        assert.equal(
          (await server.request(method, path, { key: 'not-a-valid-key-at-all' })).status,
          401,
          path,
        );
      }
      assert.equal(await orderCount(), before);
      assert.equal(await animalStatus(server, petId), 'available');
    });

    test('when an order is delivered, then 200 returns it delivered and the animal is sold; delivered again, 200 unchanged; cancelled, 409 and nothing changes', async () => {
      const petId = await addAnimal(server);
      const order = await placeOrder(server, petId);
      const delivered = await post(`/v1/store/orders/${order.id}/deliver`);
      assert.equal(delivered.status, 200, delivered.text);
      assert.deepEqual(delivered.json(), { ...order, status: 'delivered' });
      assert.equal(await animalStatus(server, petId), 'sold');

      const again = await post(`/v1/store/orders/${order.id}/deliver`);
      assert.equal(again.status, 200);
      assert.equal(again.text, delivered.text);
      assertError(
        await post(`/v1/store/orders/${order.id}/cancel`),
        409,
        'conflict',
        'the order is delivered; only a placed order can be cancelled',
      );
      assert.deepEqual((await server.request('GET', `/v1/store/orders/${order.id}`)).json(), {
        ...order,
        status: 'delivered',
      });
      assert.equal(await animalStatus(server, petId), 'sold');
      assertError(await post('/v1/store/orders', { petId }), 409, 'conflict', NOT_AVAILABLE('sold'));
    });

    test('when an order is cancelled, then 200 returns it cancelled and the animal is available again; cancelled again, 200 unchanged; delivered, 409; the animal can be ordered anew', async () => {
      const petId = await addAnimal(server);
      const order = await placeOrder(server, petId);
      const cancelled = await post(`/v1/store/orders/${order.id}/cancel`);
      assert.equal(cancelled.status, 200, cancelled.text);
      assert.deepEqual(cancelled.json(), { ...order, status: 'cancelled' });
      assert.equal(await animalStatus(server, petId), 'available');

      const again = await post(`/v1/store/orders/${order.id}/cancel`);
      assert.equal(again.status, 200);
      assert.equal(again.text, cancelled.text);
      assertError(
        await post(`/v1/store/orders/${order.id}/deliver`),
        409,
        'conflict',
        'the order is cancelled; only a placed order can be delivered',
      );
      assert.equal(await animalStatus(server, petId), 'available');

      const second = await placeOrder(server, petId);
      assert.ok(second.id > order.id);
      assert.equal(await animalStatus(server, petId), 'pending');
      assert.deepEqual(
        (await allOrders(server, `&petId=${petId}`)).map((o) => [o.id, o.status]),
        [
          [order.id, 'cancelled'],
          [second.id, 'placed'],
        ],
      );
    });

    test('when an order id is unknown, then getOrder, deliverOrder and cancelOrder answer 404 not_found', async () => {
      for (const [method, path] of [
        ['GET', '/v1/store/orders/987654321'],
        ['POST', '/v1/store/orders/987654321/deliver'],
        ['POST', '/v1/store/orders/9223372036854775807/cancel'],
      ] as const) {
        assertError(await server.request(method, path), 404, 'not_found', 'no order has this id');
      }
    });

    for (const id of ['abc', '0', '-1', '1.5', '1e3', '9223372036854775808', '%20', '0x10']) {
      test(`when the order id is ${id}, then every order operation answers 400 naming orderId`, async () => {
        for (const [method, path] of [
          ['GET', `/v1/store/orders/${id}`],
          ['POST', `/v1/store/orders/${id}/deliver`],
          ['POST', `/v1/store/orders/${id}/cancel`],
        ] as const) {
          const res = await server.request(method, path);
          assert.equal(res.status, 400, `${method} ${path}: ${res.text}`);
          assert.match(res.json<{ message: string }>().message, /^orderId must be /);
        }
      });
    }

    test('when a body is sent to deliverOrder, then 400 and the order stays placed; an empty JSON body is no body', async () => {
      const petId = await addAnimal(server);
      const order = await placeOrder(server, petId);
      assertError(
        await post(`/v1/store/orders/${order.id}/deliver`, { force: true }),
        400,
        'invalid_request',
        'this operation takes no request body',
      );
      assert.equal(await animalStatus(server, petId), 'pending');
      const empty = await rawRequest(server, 'POST', `/v1/store/orders/${order.id}/cancel`, {
        headers: { 'content-type': 'application/json', 'content-length': '0' },
        body: '',
      });
      assert.equal(empty.status, 200, empty.text);
    });

    test('when an order path is asked with another method, then 405 with Allow listing its methods', async () => {
      for (const [method, path, allow] of [
        ['DELETE', '/v1/store/orders', 'GET, HEAD, POST'],
        ['PUT', '/v1/store/orders/1', 'GET, HEAD'],
        ['GET', '/v1/store/orders/1/deliver', 'POST'],
        ['PATCH', '/v1/store/orders/1/cancel', 'POST'],
      ] as const) {
        const res = await server.request(method, path);
        assertError(res, 405, 'method_not_allowed', `${method} is not allowed here; use ${allow}`);
        assert.equal(res.headers.get('allow'), allow);
      }
      assertError(await server.request('GET', '/v1/store'), 404, 'not_found', 'no resource at this address');
    });

    test('when the same Idempotency-Key and body are sent again, then the first 201 and order come back and nothing changes; with another animal, 422', async () => {
      const petId = await addAnimal(server);
      const headers = { 'Idempotency-Key': `order-${petId}` };
      const first = await post('/v1/store/orders', { petId }, headers);
      assert.equal(first.status, 201, first.text);
      const again = await post('/v1/store/orders', { petId }, headers);
      assert.equal(again.status, 201, again.text);
      assert.equal(again.text, first.text);
      assert.equal(again.headers.get('location'), first.headers.get('location'));
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.equal((await allOrders(server, `&petId=${petId}`)).length, 1);

      const other = await addAnimal(server);
      assertError(
        await post('/v1/store/orders', { petId: other }, headers),
        422,
        'idempotency_key_reused',
        'this Idempotency-Key was already used with a different request body; use a new key',
      );
      assert.equal(await animalStatus(server, other), 'available');
    });

    test('when a keyed order is refused with 409, then the key records nothing and may place an order later', async () => {
      const petId = await addAnimal(server);
      const blocker = await placeOrder(server, petId);
      const headers = { 'Idempotency-Key': `retry-${petId}` };
      assert.equal((await post('/v1/store/orders', { petId }, headers)).status, 409);
      assert.equal((await post(`/v1/store/orders/${blocker.id}/cancel`)).status, 200);
      const placed = await post('/v1/store/orders', { petId }, headers);
      assert.equal(placed.status, 201, placed.text);
      assert.equal(placed.headers.get('idempotent-replayed'), null);
    });

    test('when orders are listed with filters, then each filter and both together return exactly the matching orders in ascending id order', async () => {
      const pets = [await addAnimal(server), await addAnimal(server), await addAnimal(server)];
      const a = await placeOrder(server, pets[0] as number);
      const b = await placeOrder(server, pets[1] as number);
      await post(`/v1/store/orders/${a.id}/cancel`);
      const c = await placeOrder(server, pets[0] as number);
      await post(`/v1/store/orders/${b.id}/deliver`);
      const d = await placeOrder(server, pets[2] as number);
      const mine = (orders: OrderBody[]) => orders.filter((o) => pets.includes(o.petId)).map((o) => o.id);

      assert.deepEqual(mine(await allOrders(server)), [a.id, b.id, c.id, d.id]);
      assert.deepEqual(mine(await allOrders(server, '&status=placed')), [c.id, d.id]);
      assert.deepEqual(mine(await allOrders(server, '&status=cancelled')), [a.id]);
      assert.deepEqual(mine(await allOrders(server, '&status=delivered')), [b.id]);
      assert.deepEqual(mine(await allOrders(server, `&petId=${pets[0]}`)), [a.id, c.id]);
      assert.deepEqual(mine(await allOrders(server, `&petId=${pets[0]}&status=cancelled`)), [a.id]);
      assert.deepEqual(await allOrders(server, `&petId=${pets[2]}&status=delivered`), []);
      assert.deepEqual(await allOrders(server, '&petId=987654321'), []);
      for (const order of await allOrders(server, '&status=placed')) assert.equal(order.status, 'placed');
    });

    test('when more orders match than the limit, then the page is full and Link next keeps the limit and filters; following it visits each once', async () => {
      const petId = await addAnimal(server);
      const ids: number[] = [];
      for (let i = 0; i < 5; i++) {
        const order = await placeOrder(server, petId);
        ids.push(order.id);
        assert.equal((await post(`/v1/store/orders/${order.id}/cancel`)).status, 200);
      }
      const first = await server.request('GET', `/v1/store/orders?limit=2&status=cancelled&petId=${petId}`);
      assert.deepEqual(
        first.json<OrderBody[]>().map((o) => o.id),
        ids.slice(0, 2),
      );
      const href = nextHref(first) as string;
      assert.match(
        href,
        new RegExp(`^/v1/store/orders\\?limit=2&status=cancelled&petId=${petId}&cursor=[\\w-]+\\.[\\w-]+$`),
      );
      const seen: number[] = [];
      let path: string | undefined = `/v1/store/orders?limit=2&status=cancelled&petId=${petId}`;
      while (path) {
        const res = await server.request('GET', path);
        seen.push(...res.json<OrderBody[]>().map((o) => o.id));
        const next = nextHref(res);
        path = next === undefined ? undefined : toPath(next);
      }
      assert.deepEqual(seen, ids);

      // The cursor is good only with the filters it was made for, and only on this list.
      const cursor = cursorOf(href);
      for (const query of [
        `limit=2&status=placed&petId=${petId}&cursor=${cursor}`,
        `limit=2&status=cancelled&cursor=${cursor}`,
        `limit=2&status=cancelled&petId=${petId + 1}&cursor=${cursor}`,
      ]) {
        assertError(
          await server.request('GET', `/v1/store/orders?${query}`),
          400,
          'invalid_request',
          'cursor does not belong to these filters',
        );
      }
      const petCursor = cursorOf(nextHref(await server.request('GET', '/v1/pets?limit=1')) as string);
      assertError(
        await server.request('GET', `/v1/store/orders?cursor=${petCursor}`),
        400,
        'invalid_request',
        'cursor is not valid',
      );
      assertError(
        await server.request('GET', `/v1/pets?cursor=${cursor}`),
        400,
        'invalid_request',
        'cursor is not valid',
      );
    });

    test('when no limit is given, then at most 20 orders come back; limit 1 and 100 are honoured', async () => {
      for (let i = 0; i < 21; i++) await placeOrder(server, await addAnimal(server));
      const page = async (query: string) =>
        (await server.request('GET', `/v1/store/orders${query}`)).json<OrderBody[]>().length;
      assert.equal(await page(''), 20);
      assert.equal(await page('?limit=1'), 1);
      assert.ok((await page('?limit=100')) >= 21);
    });

    for (const [query, message] of [
      ['limit=0', 'limit must be at least 1'],
      ['limit=101', 'limit must be at most 100'],
      ['limit=abc', 'limit must be an integer'],
      ['limit=1.5', 'limit must be an integer'],
      ['limit=', 'limit must be an integer'],
      ['status=shipped', 'status must be one of placed, delivered, cancelled'],
      ['status=available', 'status must be one of placed, delivered, cancelled'],
      ['petId=0', 'petId must be at least 1'],
      ['petId=x', 'petId must be an integer'],
      ['petId=9223372036854775808', 'petId must be at most 9223372036854775807'],
      ['stauts=placed', 'stauts is not a known parameter'],
      ['cursor=abc', 'cursor is not valid'],
      [
        'limit=0&status=shipped',
        'limit must be at least 1; status must be one of placed, delivered, cancelled',
      ],
    ] as const) {
      test(`when listOrders is asked with ${query}, then 400 invalid_request: ${message}`, async () => {
        assertError(
          await server.request('GET', `/v1/store/orders?${query}`),
          400,
          'invalid_request',
          message,
        );
      });
    }

    test('when Store operations are served, then /metrics counts them by route template and each has a request log line with its own parameters kept', async () => {
      const order = await placeOrder(server, await addAnimal(server));
      await post(`/v1/store/orders/${order.id}/deliver`);
      await server.request(
        'GET',
        `/v1/store/orders?status=delivered&petId=${order.petId}&api_key=pst_secretsecretsecret`,
        {
          headers: { 'x-request-id': `log-${order.id}` },
        },
      );
      const metrics = (await server.request('GET', '/metrics', { key: null })).text;
      for (const [method, route, status] of [
        ['POST', '/v1/store/orders', '201'],
        ['POST', '/v1/store/orders/:orderId/deliver', '200'],
        ['GET', '/v1/store/orders', '400'],
      ] as const) {
        assert.match(
          metrics,
          new RegExp(
            `^petstore_http_requests_total\\{method="${method}",route="${route}",status="${status}"\\} [1-9]`,
            'm',
          ),
          `${method} ${route} ${status}`,
        );
      }
      assert.ok(!metrics.includes(`/v1/store/orders/${order.id}`), 'raw URLs never become label values');
      const line = logLines.find((l) => l.requestId === `log-${order.id}` && 'url' in l);
      assert.deepEqual(line && [line.url, line.statusCode], [
        `/v1/store/orders?status=delivered&petId=${order.petId}&api_key=[redacted]`,
        400,
      ]);
    });
  });

  backend.describe(`the Store under a rate limit (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({
        backend,
        env: { RATE_LIMIT_PER_SECOND: '0.01', RATE_LIMIT_BURST: '3' },
      });
    });
    after(() => server.close());

    test('when a key sends more Store requests than its burst, then the excess is 429 rate_limited with Retry-After and changes nothing', async () => {
      const petId = await addAnimal(server); // one token
      const first = await server.request('GET', '/v1/store/orders');
      assert.equal(first.status, 200);
      assert.equal(first.headers.get('ratelimit-policy'), '"per-key";q=3;w=300');
      assert.equal((await server.request('GET', '/v1/store/orders')).status, 200);
      const refused = await server.request('POST', '/v1/store/orders', { body: { petId } });
      assert.equal(refused.status, 429, refused.text);
      assert.equal(refused.json<{ code: string }>().code, 'rate_limited');
      assert.ok(Number(refused.headers.get('retry-after')) > 0);
      // Read past the API: this key has no token left.
      assert.equal((await server.storage.pets.findById(BigInt(petId)))?.status, 'available');
      assert.equal(await server.storage.orders.count(), 0);
    });
  });
}
