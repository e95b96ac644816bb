import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { after, backends, test } from '../support/backends.js';
import { killAllCliProcesses, lostConnection, type ServeProcess, startServe } from '../support/cli.js';
import { queryDatabase } from '../support/db-inspect.js';

/**
 * DECISIONS.md: a 201 (and a 200 that moved an order) means it is stored, and an order and its animal
 * change together. A real `petstore serve` process takes concurrent orders, deliveries and
 * cancellations; once `KILL_AFTER` of them have been acknowledged it gets SIGKILL while others are in
 * flight. A new process on the same database must show every acknowledged order in the status it was
 * acknowledged in (or the one a move cut off in flight may have reached), and every animal in the
 * status its order implies, read through the API and straight from the database.
 */

const KEY = 'crash-test-key-0123456789abcdef';
const WORKERS = 12;
const ANIMALS_PER_WORKER = 12;
const KILL_AFTER = 60;
const PET_STATUS: Record<string, string> = { placed: 'pending', delivered: 'sold', cancelled: 'available' };

after(() => killAllCliProcesses());

async function serve(t: TestContext, url: string): Promise<ServeProcess> {
  const server = await startServe({
    DATABASE_URL: url,
    PETSTORE_API_KEYS: KEY,
    LOG_LEVEL: 'info',
    RATE_LIMIT_PER_SECOND: '0',
    OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
  });
  t.after(() => server.kill());
  return server;
}

async function call(base: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${KEY}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** What the client knows of one animal's order: the status last acknowledged, and a move sent but unanswered. */
interface Known {
  orderId?: number;
  acknowledged?: string;
  /** A request whose answer never came (the kill): its effect may or may not be stored. */
  inFlight?: 'placed' | 'delivered' | 'cancelled';
}

for (const backend of backends) {
  backend.describe(`crash durability of orders (${backend.name})`, () => {
    test(`when the server is killed with SIGKILL after ${KILL_AFTER} acknowledged orders, deliveries and cancellations, then after a restart each is stored as acknowledged, with its animal in the matching status`, async (t) => {
      const database = await backend.create();
      t.after(() => database.drop());
      const server = await serve(t, database.url);

      const animals: number[] = [];
      for (let i = 0; i < WORKERS * ANIMALS_PER_WORKER; i++) {
        const res = await call(server.url, 'POST', '/v1/pets', { name: `crash ${i}`, categoryId: i });
        assert.equal(res.status, 201);
        animals.push(res.body.id as number);
      }

      const known = new Map<number, Known>(animals.map((id) => [id, {}]));
      let acknowledged = 0;
      let killed = false;
      const refused: string[] = [];
      const acknowledge = () => {
        if (++acknowledged >= KILL_AFTER && !killed) {
          killed = true;
          server.signal('SIGKILL');
        }
      };
      await Promise.all(
        Array.from({ length: WORKERS }, async (_, w) => {
          // Each worker orders its own animals: place, then deliver two in three, cancel the rest.
          for (const [i, petId] of animals
            .slice(w * ANIMALS_PER_WORKER, (w + 1) * ANIMALS_PER_WORKER)
            .entries()) {
            const state = known.get(petId) as Known;
            try {
              state.inFlight = 'placed';
              const placed = await call(server.url, 'POST', '/v1/store/orders', { petId });
              if (placed.status !== 201) refused.push(`place ${petId}: ${placed.status}`);
              state.orderId = placed.body.id as number;
              state.acknowledged = 'placed';
              state.inFlight = undefined;
              acknowledge();
              const move = i % 3 === 2 ? 'cancel' : 'deliver';
              state.inFlight = move === 'cancel' ? 'cancelled' : 'delivered';
              const moved = await call(server.url, 'POST', `/v1/store/orders/${state.orderId}/${move}`);
              if (moved.status !== 200) refused.push(`${move} ${state.orderId}: ${moved.status}`);
              state.acknowledged = moved.body.status as string;
              state.inFlight = undefined;
              acknowledge();
            } catch (error) {
              // Only the kill ends a worker (the process is gone: the request in flight has an unknown fate).
              if (killed && lostConnection(error)) return;
              throw error;
            }
          }
        }),
      );
      assert.equal((await server.exitStatus()).signal, 'SIGKILL');
      assert.deepEqual(refused, [], 'every request before the kill was accepted');
      assert.ok(acknowledged >= KILL_AFTER);

      const restarted = await serve(t, database.url);
      let checked = 0;
      for (const [petId, state] of known) {
        const pet = await call(restarted.url, 'GET', `/v1/pets/${petId}`);
        const listed = await call(restarted.url, 'GET', `/v1/store/orders?petId=${petId}`);
        const orders = listed.body as unknown as { id: number; status: string }[];
        if (state.acknowledged === undefined) {
          // Never acknowledged: perhaps placed (in flight), never anything else.
          assert.ok(
            orders.length === 0 || (state.inFlight === 'placed' && orders.length === 1),
            `animal ${petId}`,
          );
        } else {
          checked++;
          assert.equal(orders.length, 1, `animal ${petId} has its one order`);
          const [order] = orders as [{ id: number; status: string }];
          assert.equal(order.id, state.orderId);
          const possible = [state.acknowledged, ...(state.inFlight ? [state.inFlight] : [])];
          assert.ok(
            possible.includes(order.status),
            `order ${order.id} is ${order.status}, acknowledged ${possible}`,
          );
        }
        // Whatever was stored, the animal agrees with it.
        const expected = orders[0] ? PET_STATUS[orders[0].status] : 'available';
        assert.equal(pet.body.status, expected, `animal ${petId} agrees with its order`);
      }
      assert.ok(checked >= KILL_AFTER / 2, `${checked} acknowledged orders checked`);

      // The database itself agrees, row for row: every order's animal is in the status the order implies.
      const mismatched = await queryDatabase(
        database.url,
        `SELECT o.id, o.status, p.status AS pet_status FROM orders o JOIN pets p ON p.id = o.pet_id
         WHERE NOT ((o.status = 'placed' AND p.status = 'pending') OR (o.status = 'delivered' AND p.status = 'sold')
                 OR (o.status = 'cancelled' AND p.status = 'available'))`,
      );
      assert.deepEqual(mismatched, []);
      t.diagnostic(
        `${acknowledged} acknowledged before the kill, ${checked} orders checked after the restart`,
      );
    });
  });
}
