import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { after, backends, before, POSTGRES_TEST_URL, postgres, sqlite, test } from '../support/backends.js';
import { killAllCliProcesses, poll, type ServeProcess, startServe, tempDatabase } from '../support/cli.js';
import { queryDatabase } from '../support/db-inspect.js';
import { assertError } from '../support/error-body.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { type Received, WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * Webhooks when things go wrong: two nodes on one database (no delivery attempted twice at once), a
 * node killed in the middle of attempts and of writes (nothing acknowledged is lost, every event is
 * delivered after a restart), and a database that goes away while deliveries are due.
 */

const KEY = 'webhook-faults-key-0123456789abcdef';
const HOOKS = {
  WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
  WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms',
};

after(() => killAllCliProcesses());

const idsOf = (requests: Received[]) => requests.map((r) => Number(r.headers['webhook-id']));
const eventIds = async (url: string) =>
  (await queryDatabase<{ id: number | bigint }>(url, 'SELECT id FROM events ORDER BY id')).map((r) =>
    Number(r.id),
  );

for (const backend of backends) {
  backend.describe(`webhooks on two nodes (${backend.name})`, () => {
    let nodes: TestServer[];
    let receiver: WebhookReceiver;
    before(async () => {
      receiver = await WebhookReceiver.start();
      const first = await startTestServer({ backend, env: HOOKS });
      nodes = [first, await startTestServer({ database: first.database, env: HOOKS })];
    });
    after(async () => {
      // The node that made the database closes last: it drops the database, which must not run under the other.
      for (const node of [...nodes].reverse()) await node.close();
      await receiver.close();
    });

    test('when both nodes deliver the events of 40 creates made on both, then every event arrives exactly once (no two nodes attempt one delivery)', async () => {
      receiver.answer(async () => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        return { status: 200 };
      });
      const [a, b] = nodes as [TestServer, TestServer];
      const created = await a.request('POST', '/v1/webhook-endpoints', {
        body: { url: receiver.url('/both') },
      });
      assert.equal(created.status, 201);
      await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          (i % 2 ? a : b).request('POST', '/v1/pets', { body: { name: `pet ${i}`, categoryId: 1 } }),
        ),
      );
      const expected = await eventIds(a.database.url);
      assert.equal(expected.length, 40);
      await receiver.waitFor(40, '/both');
      await poll('every delivery to be recorded', async () => {
        const rows = await queryDatabase(
          a.database.url,
          "SELECT 1 FROM webhook_deliveries WHERE status = 'succeeded'",
        );
        return rows.length === 40 ? true : undefined;
      });
      assert.deepEqual(
        idsOf(receiver.received.filter((r) => r.path === '/both')).sort((x, y) => x - y),
        expected,
      );
    });
  });

  backend.describe(`webhooks and a node killed with SIGKILL (${backend.name})`, () => {
    test('when the service is killed right after acknowledged creates and orders, with attempts in flight, then after a restart every acknowledged change has its event and every event reaches the receiver', async (t) => {
      const receiver = await WebhookReceiver.start();
      t.after(() => receiver.close());
      const file = backend === sqlite ? tempDatabase() : undefined;
      const database = file ? undefined : await backend.create();
      const services: ServeProcess[] = [];
      // The services go before their database: dropping it under a running one deadlocks.
      t.after(async () => {
        for (const service of services) await service.kill();
        if (file) file.remove();
        else await database?.drop();
      });
      const url = file?.url ?? (database?.url as string);
      const env = {
        DATABASE_URL: url,
        PETSTORE_API_KEYS: KEY,
        LOG_LEVEL: 'info',
        RATE_LIMIT_PER_SECOND: '0',
        WEBHOOK_TIMEOUT_MS: '1000',
        ...HOOKS,
      };
      const call = (base: string, method: string, path: string, body?: unknown) =>
        fetch(`${base}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${KEY}`,
            ...(body ? { 'content-type': 'application/json' } : {}),
          },
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
      receiver.answer(() => ({ hang: true })); // attempts are under way when the process dies
      const first = await startServe(env);
      services.push(first);
      const endpoint = await call(first.url, 'POST', '/v1/webhook-endpoints', {
        url: receiver.url('/crash'),
      });
      assert.equal(endpoint.status, 201);

      const acknowledged = { pets: new Set<number>(), orders: new Set<number>() };
      let killed = false;
      const writer = async () => {
        while (!killed) {
          try {
            const pet = await call(first.url, 'POST', '/v1/pets', { name: 'doomed', categoryId: 1 });
            if (pet.status !== 201) return;
            const { id } = (await pet.json()) as { id: number };
            acknowledged.pets.add(id);
            const order = await call(first.url, 'POST', '/v1/store/orders', { petId: id });
            if (order.status !== 201) return;
            acknowledged.orders.add(((await order.json()) as { id: number }).id);
          } catch {
            return; // the kill cut the request: it was not acknowledged
          }
          // Deliveries fan out after the changes commit: the kill waits for the first attempt to be under way.
          if (
            acknowledged.pets.size + acknowledged.orders.size >= 40 &&
            receiver.received.length > 0 &&
            !killed
          ) {
            killed = true;
            first.signal('SIGKILL');
          }
        }
      };
      await Promise.all(Array.from({ length: 8 }, writer));
      assert.equal((await first.exited).signal, 'SIGKILL');
      assert.ok(receiver.received.length > 0, 'some attempts were in flight');

      receiver.answer(() => ({ status: 200 }));
      const second = await startServe(env);
      services.push(second);
      const events = await queryDatabase<{ id: number | bigint; type: string; data: string }>(
        url,
        'SELECT id, type, data FROM events ORDER BY id',
      );
      const changed = (type: string) =>
        new Set(events.filter((e) => e.type === type).map((e) => (JSON.parse(e.data) as { id: number }).id));
      for (const id of acknowledged.pets)
        assert.ok(changed('pet.created').has(id), `pet ${id} has its event`);
      for (const id of acknowledged.orders)
        assert.ok(changed('order.placed').has(id), `order ${id} has its event`);
      const all = events.map((e) => Number(e.id));
      await poll('every event to reach the receiver', () => {
        const got = new Set(idsOf(receiver.received));
        return all.every((id) => got.has(id)) ? true : undefined;
      });
      await poll('every delivery to succeed', async () => {
        const rows = await queryDatabase(url, "SELECT 1 FROM webhook_deliveries WHERE status = 'succeeded'");
        return rows.length === all.length ? true : undefined;
      });
    });
  });
}

/** Deliveries due while the database cannot be reached: none is lost, and they go out once it is back. */
async function outage(
  t: { after(fn: () => unknown): void },
  server: TestServer,
  receiver: WebhookReceiver,
  down: () => Promise<void>,
  up: () => Promise<void>,
): Promise<void> {
  // Every first attempt fails, so each delivery is due again (100 ms later) while the database is down.
  const seen = new Set<string>();
  receiver.answer((request) => {
    const id = request.headers['webhook-id'] as string;
    if (seen.has(id)) return { status: 200 };
    seen.add(id);
    return { status: 503 };
  });
  const created = await server.request('POST', '/v1/webhook-endpoints', {
    body: { url: receiver.url('/outage') },
  });
  assert.equal(created.status, 201);
  for (let i = 0; i < 5; i++)
    assert.equal(
      (await server.request('POST', '/v1/pets', { body: { name: `o${i}`, categoryId: 1 } })).status,
      201,
    );
  await receiver.waitFor(5, '/outage');
  await down();
  t.after(up);
  // Meanwhile the new operations that write answer 503 unavailable with Retry-After, storing nothing.
  const refused = await server.request('POST', '/v1/webhook-endpoints', {
    body: { url: receiver.url('/refused') },
  });
  assertError(refused, 503, 'unavailable');
  assert.match(refused.headers.get('retry-after') ?? '', /^[1-9]\d*$/);
  // Long enough for several due retries to meet the outage (not a bound on anything).
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  await up();
  // Serving again by itself: the feed answers, and the refused endpoint was never stored.
  assert.equal((await server.request('GET', '/v1/events')).status, 200);
  const endpoints = (await server.request('GET', '/v1/webhook-endpoints')).json<{ url: string }[]>();
  assert.deepEqual(
    endpoints.map((e) => e.url),
    [receiver.url('/outage')],
  );
  const requests = await receiver.waitFor(10, '/outage');
  const ids = new Set(idsOf(requests));
  assert.equal(ids.size, 5);
  await poll('every delivery to succeed', async () => {
    const rows = await queryDatabase(
      server.database.url,
      "SELECT 1 FROM webhook_deliveries WHERE status = 'succeeded'",
    );
    return rows.length === 5 ? true : undefined;
  });
}

postgres.describe('webhooks while PostgreSQL goes away and comes back', () => {
  test('when the connection is cut while deliveries are due, then nothing is lost and they are delivered once it is back', async (t) => {
    const receiver = await WebhookReceiver.start();
    t.after(() => receiver.close());
    const database = await postgres.create();
    const proxy = await TcpProxy.start('127.0.0.1', Number(new URL(POSTGRES_TEST_URL).port || 5432));
    const server = await startTestServer({
      database: { ...database, url: proxy.route(database.url) },
      env: { ...HOOKS, DATABASE_TIMEOUT_MS: '500' },
    });
    t.after(async () => {
      proxy.resume();
      await server.close();
      await proxy.close();
      await database.drop();
    });
    await outage(
      t,
      { ...server, database: { ...database } }, // queried directly, not through the proxy
      receiver,
      async () => proxy.cut(),
      async () => proxy.resume(),
    );
  });
});

sqlite.describe('webhooks while another process holds the SQLite file', () => {
  test('when the write lock is held while deliveries are due, then nothing is lost and they are delivered once it is let go', async (t) => {
    const receiver = await WebhookReceiver.start();
    t.after(() => receiver.close());
    const server = await startTestServer({ backend: sqlite, env: { ...HOOKS, DATABASE_TIMEOUT_MS: '200' } });
    t.after(() => server.close());
    const holder = fileURLToPath(new URL('../support/hold-sqlite-lock.ts', import.meta.url));
    let lock: ReturnType<typeof spawn> | undefined;
    await outage(
      t,
      server,
      receiver,
      async () => {
        lock = spawn(
          process.execPath,
          ['--import', 'tsx', holder, server.database.url.slice('sqlite:'.length)],
          {
            stdio: ['pipe', 'pipe', 'inherit'],
          },
        );
        await once(lock.stdout as NodeJS.ReadableStream, 'data');
      },
      async () => {
        if (!lock || lock.exitCode !== null) return;
        lock.stdin?.end();
        await once(lock, 'exit');
      },
    );
  });
});

for (const backend of backends) {
  backend.describe(`webhooks when a node shuts down (${backend.name})`, () => {
    test('when a node is closed with an attempt under way that outlasts the drain, then it takes no new attempt, gives the lease back, and another node delivers it at once', async (t) => {
      const receiver = await WebhookReceiver.start();
      t.after(() => receiver.close());
      receiver.answer(() => ({ hang: true }));
      // A long timeout (and so a long lease): only a lease given back lets the other node in quickly.
      const env = { ...HOOKS, WEBHOOK_TIMEOUT_MS: '60000' };
      const database = await backend.create();
      let other: TestServer | undefined;
      // The second node closes before the database goes: dropping it under a running node deadlocks.
      t.after(async () => {
        await other?.close();
        await database.drop();
      });
      const closing = await startTestServer({ database, env });
      const created = await closing.request('POST', '/v1/webhook-endpoints', {
        body: { url: receiver.url('/drain') },
      });
      assert.equal(created.status, 201);
      assert.equal(
        (await closing.request('POST', '/v1/pets', { body: { name: 'drained', categoryId: 1 } })).status,
        201,
      );
      const [held] = await receiver.waitFor(1, '/drain');
      await closing.close();
      const [row] = await queryDatabase<{ lease_until: unknown; status: string; attempts: number | bigint }>(
        closing.database.url,
        'SELECT lease_until, status, attempts FROM webhook_deliveries',
      );
      assert.deepEqual(
        { ...row, attempts: Number(row?.attempts) },
        { lease_until: null, status: 'pending', attempts: 0 },
      );
      receiver.answer(() => ({ status: 200 }));
      other = await startTestServer({ database, env });
      const requests = await receiver.waitFor(2, '/drain');
      assert.equal(requests[1]?.headers['webhook-id'], held?.headers['webhook-id']);
      await poll('the delivery to succeed', async () => {
        const rows = await queryDatabase(
          other.database.url,
          "SELECT 1 FROM webhook_deliveries WHERE status = 'succeeded'",
        );
        return rows.length === 1 ? true : undefined;
      });
    });
  });
}

for (const backend of backends) {
  backend.describe(`delivery processes and SIGKILL (${backend.name})`, () => {
    test('when one of two --role deliver processes is killed with SIGKILL mid-batch, then the other delivers every event the --role api node acknowledged, and no delivery is ever attempted by two processes at once', async (t) => {
      const receiver = await WebhookReceiver.start();
      t.after(() => receiver.close());
      const api = await startTestServer({ backend, env: HOOKS, role: 'api' });
      const deliverers: ServeProcess[] = [];
      // The processes go before their database: the api node drops it when it closes.
      t.after(async () => {
        for (const process of deliverers) await process.kill();
        await api.close();
      });
      // Each id held for 50 ms (4 at once: 80 a second, the kill lands mid-way): a second attempt of it
      // arriving meanwhile is an overlap.
      const inFlight = new Set<string>();
      const overlaps: string[] = [];
      receiver.answer(async (request) => {
        const id = request.headers['webhook-id'] as string;
        if (inFlight.has(id)) overlaps.push(id);
        inFlight.add(id);
        await new Promise((resolve) => setTimeout(resolve, 50));
        inFlight.delete(id);
        return { status: 200 };
      });
      const endpoint = await api.request('POST', '/v1/webhook-endpoints', {
        body: { url: receiver.url('/split') },
      });
      assert.equal(endpoint.status, 201);
      for (let i = 0; i < 200; i += 20)
        await Promise.all(
          Array.from({ length: 20 }, async (_, j) => {
            const res = await api.request('POST', '/v1/pets', {
              body: { name: `split ${i + j}`, categoryId: 1 },
            });
            assert.equal(res.status, 201);
          }),
        );
      const env = {
        DATABASE_URL: api.database.url,
        PETSTORE_API_KEYS: KEY,
        RATE_LIMIT_PER_SECOND: '0',
        // Short leases: those of the killed process run out within 2 s.
        WEBHOOK_TIMEOUT_MS: '1000',
        ...HOOKS,
      };
      for (let i = 0; i < 2; i++) deliverers.push(await startServe(env, { role: 'deliver' }));
      await receiver.waitFor(20, '/split');
      // The process delivering (while it holds the endpoint's leases the other takes none of them): the
      // one whose attempts its metrics count.
      const attempts = (text: string) =>
        Number(/^petstore_webhook_attempts_total\{outcome="succeeded"\} (\d+)$/m.exec(text)?.[1] ?? 0);
      const doomed = await poll('a delivery process to have made attempts', async () => {
        const counts = await Promise.all(
          deliverers.map(async (p) => attempts(await (await fetch(`${p.url}/metrics`)).text())),
        );
        const busiest = counts.indexOf(Math.max(...counts));
        return (counts[busiest] as number) > 0 ? deliverers[busiest] : undefined;
      });
      doomed.signal('SIGKILL');
      assert.equal((await doomed.exited).signal, 'SIGKILL');

      const all = await eventIds(api.database.url);
      assert.equal(all.length, 200);
      await poll('every event to reach the receiver', () => {
        const got = new Set(idsOf(receiver.received));
        return all.every((id) => got.has(id)) ? true : undefined;
      });
      await poll('every delivery to be recorded as succeeded', async () => {
        const rows = await queryDatabase(
          api.database.url,
          "SELECT 1 FROM webhook_deliveries WHERE status = 'succeeded'",
        );
        return rows.length === all.length ? true : undefined;
      });
      assert.deepEqual(overlaps, [], 'no delivery attempted by two processes at once');
      // More attempts than events: the killed process's attempts in flight, made again once their leases ran out.
      t.diagnostic(`${receiver.received.length} attempts for ${all.length} events`);
    });
  });
}
