import assert from 'node:assert/strict';
import { after, backends, before, type TestDatabase, test } from '../support/backends.js';
import { queryDatabase } from '../support/db-inspect.js';
import { addAnimal, type OrderBody, placeOrder } from '../support/orders.js';
import { nextHref, toPath } from '../support/paging.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

/**
 * Races on the Store, settled by the database: requests are fired together, then what the database
 * holds is read directly (past the service) and compared with what was answered. On one node, and on
 * two nodes sharing one database (two connections to one SQLite file; two pools on one PostgreSQL).
 */

/** The orders of one animal and the animal's status, as stored. */
async function stored(url: string, petId: number): Promise<{ orders: string[]; animal: string }> {
  const orders = await queryDatabase<{ status: string }>(
    url,
    `SELECT status FROM orders WHERE pet_id = ${petId} ORDER BY id`,
  );
  const [pet] = await queryDatabase<{ status: string }>(url, `SELECT status FROM pets WHERE id = ${petId}`);
  return { orders: orders.map((o) => o.status), animal: pet?.status as string };
}

/**
 * 24 orders for one new animal, spread over `nodes`, every third with an Idempotency-Key of its own (a
 * keyed placement takes another path than a plain one): exactly one 201, every other 409, one placed
 * order stored.
 */
async function orderRace(nodes: TestServer[], url: string): Promise<void> {
  const petId = await addAnimal(nodes[0] as TestServer, 'available', 'raced for');
  const answers = await Promise.all(
    Array.from({ length: 24 }, (_, i) =>
      (nodes[i % nodes.length] as TestServer).request('POST', '/v1/store/orders', {
        body: { petId },
        ...(i % 3 === 0 ? { headers: { 'Idempotency-Key': `race-${petId}-${i}` } } : {}),
      }),
    ),
  );
  assert.deepEqual(
    answers.map((a) => a.status).sort(),
    [201, ...Array(23).fill(409)],
    answers.map((a) => a.text).join('\n'),
  );
  for (const answer of answers.filter((a) => a.status === 409)) {
    assert.equal(
      answer.json<{ message: string }>().message,
      'the animal is pending; only an available animal can be ordered',
    );
  }
  const winner = (answers.find((a) => a.status === 201)?.json() ?? {}) as OrderBody;
  assert.deepEqual(await stored(url, petId), { orders: ['placed'], animal: 'pending' });
  for (const node of nodes) {
    const listed = await node.request('GET', `/v1/store/orders?petId=${petId}`);
    assert.deepEqual(listed.json(), [winner], `${node.url} lists the one order`);
  }
}

/**
 * Deliveries and cancellations of one placed order, together, spread over `nodes`: one move wins; every
 * other request answers the winner's order (200, the same move asked again) or 409 (the other move);
 * the database holds the order and its animal in agreement.
 */
async function settleRace(nodes: TestServer[], url: string, rounds: number): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    const petId = await addAnimal(nodes[0] as TestServer, 'available', 'settled');
    const order = await placeOrder(nodes[round % nodes.length] as TestServer, petId);
    const moves = Array.from({ length: 10 }, (_, i) => (i % 2 === round % 2 ? 'deliver' : 'cancel'));
    const answers = await Promise.all(
      moves.map((move, i) =>
        (nodes[i % nodes.length] as TestServer).request('POST', `/v1/store/orders/${order.id}/${move}`),
      ),
    );
    const { orders, animal } = await stored(url, petId);
    assert.equal(orders.length, 1);
    const final = orders[0] as string;
    assert.ok(final === 'delivered' || final === 'cancelled', `round ${round}: ${final}`);
    assert.equal(
      animal,
      final === 'delivered' ? 'sold' : 'available',
      `round ${round}: order and animal agree`,
    );
    for (const [i, answer] of answers.entries()) {
      const asked = moves[i] === 'deliver' ? 'delivered' : 'cancelled';
      if (asked === final) {
        assert.equal(answer.status, 200, answer.text);
        assert.deepEqual(answer.json(), { ...order, status: final });
      } else {
        assert.equal(answer.status, 409, answer.text);
        assert.equal(answer.json<{ code: string }>().code, 'conflict');
      }
    }
  }
}

for (const backend of backends) {
  backend.describe(`races on the Store (${backend.name})`, () => {
    let database: TestDatabase;
    /** Two nodes on one database: one connection each to one SQLite file, one pool each on PostgreSQL. */
    let nodes: [TestServer, TestServer];
    let server: TestServer;
    before(async () => {
      database = await backend.create();
      nodes = [await startTestServer({ database }), await startTestServer({ database })];
      server = nodes[0];
    });
    after(async () => {
      for (const node of nodes ?? []) await node.close();
      await database?.drop();
    });

    test('when 24 orders for one animal arrive at once, then exactly one is 201, the 23 others 409, and the database holds one placed order and a pending animal', async () => {
      for (let round = 0; round < 3; round++) await orderRace([server], database.url);
    });

    test('when deliveries and cancellations of one order arrive at once, then one move wins, the others answer it or 409, and order and animal agree in the database', async () => {
      await settleRace([server], database.url, 6);
    });

    test('when orders are placed and cancelled while a client follows the next links of listOrders, then every order that existed at the start is seen exactly once, in ascending id order', async () => {
      const initial: OrderBody[] = [];
      for (let i = 0; i < 30; i++) initial.push(await placeOrder(server, await addAnimal(server)));
      const startedAt = (await server.request('GET', '/v1/store/orders?limit=100')).json<OrderBody[]>();
      const existing = new Set(startedAt.map((o) => o.id));
      for (const order of initial) assert.ok(existing.has(order.id));

      const placedMeanwhile: OrderBody[] = [];
      const seen: OrderBody[] = [];
      let path: string | undefined = '/v1/store/orders?limit=4';
      while (path !== undefined) {
        const res = await server.request('GET', path);
        assert.equal(res.status, 200, res.text);
        seen.push(...res.json<OrderBody[]>());
        const href = nextHref(res);
        path = href === undefined ? undefined : toPath(href);
        // Between two pages: two more orders placed, and one of those already there cancelled.
        if (path !== undefined) {
          placedMeanwhile.push(
            ...(await Promise.all([0, 1].map(async () => placeOrder(server, await addAnimal(server))))),
          );
          const victim = initial[placedMeanwhile.length % initial.length] as OrderBody;
          await server.request('POST', `/v1/store/orders/${victim.id}/cancel`);
        }
      }
      const ids = seen.map((o) => o.id);
      assert.equal(new Set(ids).size, ids.length, 'an order was seen twice');
      assert.deepEqual(
        ids,
        [...ids].sort((a, b) => a - b),
        'ascending id order',
      );
      assert.deepEqual(
        ids.filter((id) => existing.has(id)),
        startedAt.map((o) => o.id),
        'every order that existed at the start, once',
      );
      assert.ok(placedMeanwhile.length >= 2 * 7, `${placedMeanwhile.length} placed during the walk`);
      const meanwhile = new Set(placedMeanwhile.map((o) => o.id));
      for (const id of ids.filter((id) => !existing.has(id)))
        assert.ok(meanwhile.has(id), `order ${id} was never placed`);
    });

    test('when 24 orders for one animal arrive at once through two nodes, then exactly one is 201 and the database holds one placed order', async () => {
      for (let round = 0; round < 3; round++) await orderRace(nodes, database.url);
    });

    test('when deliveries and cancellations of one order arrive at once through two nodes, then one move wins and order and animal agree in the database', async () => {
      await settleRace(nodes, database.url, 6);
    });
  });
}
