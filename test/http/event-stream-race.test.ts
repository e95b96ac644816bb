import assert from 'node:assert/strict';
import { DRAIN_GRACE_MS } from '../../src/http/connection/connections.js';
import { after, before, postgres, sqlite, test } from '../support/backends.js';
import { killAllCliProcesses, startServe, tempDatabase, workerPids } from '../support/cli.js';
import { queryDatabase } from '../support/db-inspect.js';
import { processHolding, TestStream } from '../support/event-stream.js';
import { until } from '../support/eventually.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

/**
 * The stream's no-skip promise across nodes: writers on two nodes of one PostgreSQL database, and on the
 * two processes of `serve --workers 2` on one SQLite file, while streams are open on each. Ids commit
 * out of order on PostgreSQL unless ordered (events.ts), and each node learns of the other's commits
 * only through the database (a NOTIFY; SQLite's change counter): every stream must still get every
 * event once, ascending, with no gap. Also: how long a 201 on one node takes to reach the other's
 * stream, and a SIGTERM ending the streams of a process that then exits.
 */

const WRITERS = 8;
const CHANGES = 150;
const KEY = 'event-stream-race-key-0123456789';

after(() => killAllCliProcesses());

interface Writes {
  /** When each pet's 201 arrived (performance.now()), by pet id. */
  createdAt: Map<number, number>;
  count: number;
}

/** Writers creating pets and placing orders through `call` until CHANGES are acknowledged. */
async function write(
  nodes: number,
  call: (node: number, path: string, body: unknown) => Promise<{ status: number; id: number }>,
): Promise<Writes> {
  const writes: Writes = { createdAt: new Map(), count: 0 };
  const writer = async (n: number) => {
    while (writes.count < CHANGES) {
      const pet = await call(n % nodes, '/v1/pets', { name: `racer ${n}`, categoryId: n });
      assert.equal(pet.status, 201);
      writes.createdAt.set(pet.id, performance.now());
      writes.count++;
      const order = await call((n + 1) % nodes, '/v1/store/orders', { petId: pet.id });
      assert.equal(order.status, 201);
      writes.count++;
    }
  };
  await Promise.all(Array.from({ length: WRITERS }, (_, n) => writer(n)));
  return writes;
}

/** Waits until `stream` has every event up to `last`, then checks it has exactly `stored`, in order. */
async function assertEveryEventOnce(stream: TestStream, stored: number[], what: string): Promise<void> {
  const last = stored[stored.length - 1] ?? 0;
  await until(
    async () => stream.ids(),
    (ids) => (ids[ids.length - 1] ?? 0) >= last,
    `${what} to reach event ${last}`,
  );
  assert.deepEqual(stream.ids(), stored, `${what}: every event once, in ascending order, no gap`);
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
};

postgres.describe('live event streams under concurrent writers on two PostgreSQL nodes', () => {
  let nodes: TestServer[];
  before(async () => {
    const first = await startTestServer({ backend: postgres });
    nodes = [first, await startTestServer({ database: first.database })];
  });
  after(async () => {
    for (const node of [...nodes].reverse()) await node.close();
  });

  test('when 8 writers on two nodes create and order while a stream is open on each, then each stream gets every event once, in order, with no gap', async (t) => {
    const [a, b] = nodes as [TestServer, TestServer];
    const streams = await Promise.all([a, b].map((node) => TestStream.open(`${node.url}/v1/events`)));
    const writes = await write(2, async (node, path, body) => {
      const res = await (nodes[node] as TestServer).request('POST', path, { body });
      return { status: res.status, id: res.json<{ id: number }>().id };
    });
    const stored = (
      await queryDatabase<{ id: number | bigint }>(a.database.url, 'SELECT id FROM events ORDER BY id')
    ).map((row) => Number(row.id));
    assert.equal(stored.length, writes.count, 'one event per acknowledged change');
    for (const [n, stream] of streams.entries())
      await assertEveryEventOnce(stream, stored, `node ${n}'s stream`);

    // From a 201 on one node to the message on the other node's stream (writer n created on node n % 2).
    const latencies: number[] = [];
    for (const [n, stream] of streams.entries())
      stream.messages.forEach((message, i) => {
        if (message.type !== 'pet.created') return;
        const pet = JSON.parse(message.data) as { data: { id: number; name: string } };
        const writer = Number(pet.data.name.split(' ')[1]);
        const createdAt = writes.createdAt.get(pet.data.id);
        if (writer % 2 !== n && createdAt !== undefined)
          latencies.push(Math.max(0, (stream.arrivals[i] as number) - createdAt));
      });
    t.diagnostic(
      `201 on one node to the other node's stream: p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms (${latencies.length} events, under the test's own load)`,
    );
    for (const stream of streams) stream.close();
  });
});

sqlite.describe('live event streams under concurrent writers in two processes on one SQLite file', () => {
  test('when serve --workers 2 takes creates and orders from 8 writers while streams are open, then each stream gets every event once, in order; on SIGTERM every stream ends cleanly and the process exits', async (t) => {
    const file = tempDatabase();
    t.after(() => file.remove());
    const service = await startServe(
      { DATABASE_URL: file.url, PETSTORE_API_KEYS: KEY, RATE_LIMIT_PER_SECOND: '0' },
      { workers: 2 },
    );
    t.after(() => service.kill());
    // The kernel hands each connection to either worker: streams are opened until each worker holds one.
    const pids = await workerPids(service);
    const streams: TestStream[] = [];
    const holders = new Set<number | undefined>();
    while (streams.length < 10 && !pids.every((pid) => holders.has(pid))) {
      const stream = await TestStream.open(`${service.url}/v1/events`, { key: KEY });
      assert.equal(stream.status, 200);
      streams.push(stream);
      holders.add(processHolding(stream.localPort as number, pids));
    }
    assert.ok(
      pids.every((pid) => holders.has(pid)),
      `a stream on each worker (${streams.length} streams, on ${[...holders].join(', ')})`,
    );
    const writes = await write(1, async (_node, path, body) => {
      const res = await fetch(`${service.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, id: ((await res.json()) as { id: number }).id };
    });
    const stored = (
      await queryDatabase<{ id: number | bigint }>(file.url, 'SELECT id FROM events ORDER BY id')
    ).map((row) => Number(row.id));
    assert.equal(stored.length, writes.count, 'one event per acknowledged change');
    for (const [n, stream] of streams.entries()) await assertEveryEventOnce(stream, stored, `stream ${n}`);

    const stopped = performance.now();
    service.signal('SIGTERM');
    const ends = await Promise.all(streams.map((stream) => stream.ended));
    const streamsEndedMs = performance.now() - stopped;
    const exit = await service.exitStatus();
    const exitedMs = performance.now() - stopped;
    t.diagnostic(
      `SIGTERM: streams ended after ${streamsEndedMs.toFixed(0)} ms, the process exited after ${exitedMs.toFixed(0)} ms`,
    );
    assert.deepEqual(ends, Array(streams.length).fill('end'), 'each stream ended as a response ends');
    assert.ok(streamsEndedMs < DRAIN_GRACE_MS, `the streams ended ${streamsEndedMs} ms after SIGTERM`);
    // What remains after the streams is the drain of idle connections (DRAIN_GRACE_MS): no stream holds it.
    assert.ok(exitedMs < DRAIN_GRACE_MS + 4_000, `the process exited ${exitedMs} ms after SIGTERM`);
    assert.equal(exit.code, 0, service.output());
  });
});
