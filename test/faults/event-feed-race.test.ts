import assert from 'node:assert/strict';
import { after, backends, before, sqlite, test } from '../support/backends.js';
import { killAllCliProcesses, startServe, tempDatabase } from '../support/cli.js';
import { queryDatabase } from '../support/db-inspect.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

/**
 * The feed's promise under concurrency: a reader that repeats `GET /v1/events?after=<last id>` sees
 * every event exactly once, in ascending order, while writers on two nodes of one database create pets
 * and place, deliver and cancel orders. On PostgreSQL the ids come from a sequence, which hands them
 * out before commit: without ordering the commits, a reader would list an id while a smaller one is
 * still to commit, and never see the smaller one. On SQLite the two nodes are two connections to one
 * file (as two processes would be).
 */

const WRITERS = 8;
/**
 * How many changes the writers make, together, before they stop: enough to race (they overlap all along),
 * counted rather than timed, so a loaded machine makes them no fewer.
 */
const CHANGES = 150;
const KEY = 'event-race-key-0123456789abcdef';

after(() => killAllCliProcesses());

interface EventBody {
  id: number;
  type: string;
}

for (const backend of backends) {
  backend.describe(`the event feed under concurrent writers on two nodes (${backend.name})`, () => {
    let nodes: TestServer[];
    before(async () => {
      const first = await startTestServer({ backend });
      nodes = [first, await startTestServer({ database: first.database })];
    });
    after(async () => {
      // The node that made the database closes last: it drops the database, which must not run under the other.
      for (const node of [...nodes].reverse()) await node.close();
    });

    test('when 8 writers on two nodes create and order while one reader follows after=, then the reader sees every event exactly once, in order', async () => {
      const acknowledged = { pets: 0, placed: 0, settled: 0 };
      const total = () => acknowledged.pets + acknowledged.placed + acknowledged.settled;
      const writer = async (node: TestServer, n: number) => {
        while (total() < CHANGES) {
          const pet = await node.request('POST', '/v1/pets', { body: { name: `racer ${n}`, categoryId: n } });
          assert.equal(pet.status, 201, pet.text);
          acknowledged.pets++;
          const order = await node.request('POST', '/v1/store/orders', {
            body: { petId: pet.json<{ id: number }>().id },
          });
          assert.equal(order.status, 201, order.text);
          acknowledged.placed++;
          const move = n % 2 === 0 ? 'deliver' : 'cancel';
          const settled = await node.request(
            'POST',
            `/v1/store/orders/${order.json<{ id: number }>().id}/${move}`,
          );
          assert.equal(settled.status, 200, settled.text);
          acknowledged.settled++;
        }
      };
      const seen: number[] = [];
      let last = 0;
      const readOnce = async () => {
        const page = await nodes[0]?.request('GET', `/v1/events?after=${last}&limit=100`);
        assert.equal(page?.status, 200);
        const events = page?.json<EventBody[]>() ?? [];
        for (const event of events) {
          seen.push(event.id);
          last = event.id;
        }
        return events.length;
      };
      let reading = true;
      const reader = (async () => {
        while (reading) await readOnce();
      })();
      const writers = Array.from({ length: WRITERS }, (_, n) => writer(nodes[n % 2] as TestServer, n));
      await Promise.all(writers);
      reading = false;
      await reader;
      while ((await readOnce()) > 0) {} // the rest, now that nothing commits

      const stored = (
        await queryDatabase<{ id: number | bigint }>(
          nodes[0]?.database.url as string,
          'SELECT id FROM events ORDER BY id',
        )
      ).map((row) => Number(row.id));
      assert.ok(total() >= CHANGES, `enough writes to race (${total()})`);
      assert.equal(stored.length, total(), 'one event per acknowledged change');
      const missed = stored.filter((id) => !seen.includes(id));
      assert.deepEqual(missed, [], `the reader skipped ${missed.length} of ${stored.length} events`);
      assert.deepEqual(seen, stored, 'every event once, in ascending order');
    });
  });
}

sqlite.describe('the event feed under concurrent writers in several processes on one SQLite file', () => {
  test('when petstore serve --workers 2 takes creates and orders from 8 writers while a reader follows after=, then the reader sees every event exactly once, in order', async (t) => {
    const file = tempDatabase();
    t.after(() => file.remove());
    const service = await startServe(
      { DATABASE_URL: file.url, PETSTORE_API_KEYS: KEY, RATE_LIMIT_PER_SECOND: '0' },
      { workers: 2 },
    );
    t.after(() => service.kill());
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${service.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${KEY}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return { status: res.status, json: (await res.json()) as { id: number } & EventBody[] };
    };
    let acknowledged = 0;
    const writer = async (n: number) => {
      while (acknowledged < CHANGES) {
        const pet = await call('POST', '/v1/pets', { name: `worker racer ${n}`, categoryId: n });
        assert.equal(pet.status, 201);
        const order = await call('POST', '/v1/store/orders', { petId: pet.json.id });
        assert.equal(order.status, 201);
        acknowledged += 2;
      }
    };
    const seen: number[] = [];
    let last = 0;
    const readOnce = async () => {
      const page = await call('GET', `/v1/events?after=${last}&limit=100`);
      assert.equal(page.status, 200);
      for (const event of page.json) {
        seen.push(event.id);
        last = event.id;
      }
      return page.json.length;
    };
    let reading = true;
    const reader = (async () => {
      while (reading) await readOnce();
    })();
    const writers = Array.from({ length: WRITERS }, (_, n) => writer(n));
    await Promise.all(writers);
    reading = false;
    await reader;
    while ((await readOnce()) > 0) {}
    const stored = (
      await queryDatabase<{ id: number | bigint }>(file.url, 'SELECT id FROM events ORDER BY id')
    ).map((row) => Number(row.id));
    assert.ok(acknowledged >= CHANGES, `enough writes to race (${acknowledged})`);
    assert.equal(stored.length, acknowledged, 'one event per acknowledged change');
    assert.deepEqual(seen, stored, 'every event once, in ascending order');
  });
});
