import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { openStorage } from '../../src/storage/open-storage.js';
import { type ReadStats, replicaReads } from '../../src/storage/replica-reads.js';
import { createSchema, type ThrowawayDatabase } from '../../support/postgres-admin.js';
import { type ReplicationPair, replicationPair } from '../../support/postgres-replication.js';
import { oneLineFailure, runInProcess } from '../support/cli.js';
import { TestStream } from '../support/event-stream.js';
import { until } from '../support/eventually.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

// One primary and one streaming replica (support/postgres-replication.ts), two nodes on them sharing
// key positions through the local Redis, as several machines would. Keys are new each run.
const WRITER = `writer-${randomBytes(12).toString('hex')}`;
const READER = `reader-${randomBytes(12).toString('hex')}`;
// Twice the default: the stale read below must come within the bound on a machine busy with other tests.
const MAX_LAG_MS = 2_000;
/** Bounds on an answer: far above what a healthy read takes, far below a replica's timeouts. */
const ANSWER_MS = 3_000;

describe('read replicas (a real primary and streaming replica)', () => {
  let pair: ReplicationPair;
  let schema: ThrowawayDatabase;
  let a: TestServer;
  let b: TestServer;

  before(async () => {
    pair = await replicationPair();
    schema = await createSchema(pair.primaryUrl, 'replicas');
    const env = {
      DATABASE_REPLICA_URLS: pair.onReplica(schema.url),
      DATABASE_REPLICA_MAX_LAG_MS: String(MAX_LAG_MS),
      REDIS_URL: 'redis://127.0.0.1:6379',
      PETSTORE_API_KEYS: `${WRITER},${READER}`,
      // The webhook endpoint below names a local address; nothing listens there (its deliveries fail).
      WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
    };
    const database = {
      url: schema.url,
      open: () => openStorage({ databaseUrl: schema.url, databasePoolSize: 2, databaseTimeoutMs: 5_000 }),
      drop: () => schema.drop(),
    };
    a = await startTestServer({ database, env });
    b = await startTestServer({ database, env });
    // The schema made on the primary is on the replica once replayed; then both nodes use it.
    for (const node of [a, b])
      await until(
        async () => stats(node).replicas[0],
        (replica) => replica !== undefined && !replica.setAside && replica.lagSeconds * 1000 <= MAX_LAG_MS,
        'the replica to be in use',
      );
  });

  after(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await schema?.drop();
  });

  const stats = (node: TestServer) => replicaReads(node.storage)?.stats() as ReadStats;
  const petsById = (node: TestServer, key: string, id: string) =>
    node.request('GET', `/v1/pets?id=${id}`, { key, timeoutMs: ANSWER_MS });

  test('when a key that never wrote reads, then the replica serves it (its own statistics say so)', async () => {
    // The replica's own statistics of the pets table: scans there, which the probes never make.
    const scans = async () =>
      Number(
        (
          await pair.queryReplica<{ n: string }>(
            "SELECT (coalesce(seq_scan, 0) + coalesce(idx_scan, 0))::text AS n FROM pg_stat_user_tables WHERE relid = 'pets'::regclass",
            schema.url,
          )
        )[0]?.n,
      );
    const [before, scansBefore] = [stats(a).reads, await scans()];
    for (let i = 0; i < 20; i++) {
      const answer = await a.request('GET', '/v1/pets?limit=5', { key: READER });
      assert.equal(answer.status, 200);
    }
    assert.deepEqual(stats(a).reads, { primary: before.primary, replica: before.replica + 20 });
    const metrics = (await a.request('GET', '/metrics', { key: null })).text;
    assert.match(
      metrics,
      new RegExp(`petstore_db_reads_total\\{target="replica"\\} ${before.replica + 20}\\b`),
    );
    assert.match(
      metrics,
      /petstore_db_replica_lag_seconds\{replica="127\.0\.0\.1:\d+\/postgres"\} [\d.e-]+\n/,
    );
    assert.match(metrics, /petstore_db_replicas_set_aside 0\n/);
    // A server reports its statistics some seconds after an idle connection's last query.
    const scansAfter = await until(
      scans,
      (n) => n >= scansBefore + 20,
      'the replica to count 20 scans of pets',
    );
    assert.ok(scansAfter >= scansBefore + 20);
  });

  test('when replay is paused, then a key reads its own writes on either node, and another key reads the replica until the lag passes the bound', async () => {
    await pair.pauseReplay();
    const pausedAt = Date.now();
    try {
      const created = await a.request('POST', '/v1/pets', {
        key: WRITER,
        body: { name: 'Rex', categoryId: 1 },
      });
      assert.equal(created.status, 201);
      const id = String(created.json<{ id: number }>().id);

      // The writer, on the other node: its pet, from the primary (the replica has not replayed it).
      const onB = await petsById(b, WRITER, id);
      assert.equal(onB.status, 200);
      assert.deepEqual(
        onB.json<{ id: number }[]>().map((pet) => String(pet.id)),
        [id],
      );

      // Another key, within the bound: the replica's answer, without the pet.
      const replicaReadsBefore = stats(b).reads.replica;
      const stale = await petsById(b, READER, id);
      assert.equal(stale.status, 200);
      assert.deepEqual(stale.json(), [], 'read from the replica, which has not replayed the create');
      assert.equal(stats(b).reads.replica, replicaReadsBefore + 1);

      // Its order on B, then the pet on A: pending.
      const ordered = await b.request('POST', '/v1/store/orders', {
        key: WRITER,
        body: { petId: Number(id) },
      });
      assert.equal(ordered.status, 201);
      const onA = await petsById(a, WRITER, id);
      assert.deepEqual(
        onA.json<{ status: string }[]>().map((pet) => pet.status),
        ['pending'],
      );

      // The other key, once the replica is more than the bound behind: the primary's answer.
      await until(
        () => petsById(b, READER, id),
        (answer) => answer.status === 200 && answer.json<unknown[]>().length === 1,
        'the reader to see the pet once the replica lags past the bound',
      );
      const waited = Date.now() - pausedAt;
      assert.ok(waited >= MAX_LAG_MS / 2, `the replica was left after ${waited} ms, before the bound`);
      assert.ok((stats(b).replicas[0]?.lagSeconds ?? 0) * 1000 > MAX_LAG_MS, 'the replica is past the bound');
    } finally {
      await pair.resumeReplay();
    }
    // Replayed again, it serves the reader again.
    const replicaReads = stats(b).reads.replica;
    await until(
      async () => {
        await b.request('GET', '/v1/pets?limit=1', { key: READER });
        return stats(b).reads.replica;
      },
      (reads) => reads > replicaReads,
      'the reader to be served by the replica again',
    );
  });

  test('when a key changes a webhook endpoint (PATCH: a write no code registers) while replay is paused, then its next read, on the other node, sees the change, and another key still reads the replica', async () => {
    const created = await a.request('POST', '/v1/webhook-endpoints', {
      key: WRITER,
      body: { url: 'http://127.0.0.1:9/hooks', types: ['order.placed'], description: 'before' },
    });
    assert.equal(created.status, 201);
    const path = `/v1/webhook-endpoints/${created.json<{ id: number }>().id}`;
    const description = (node: TestServer, key: string) =>
      node.request('GET', path, { key, timeoutMs: ANSWER_MS });
    // Once B knows the replica replayed the create, the create's own position no longer keeps the
    // writer's reads on the primary: only the PATCH's can.
    await until(
      async () => {
        const replicaReads = stats(b).reads.replica;
        const answer = await description(b, WRITER);
        return answer.status === 200 && stats(b).reads.replica > replicaReads;
      },
      (servedByReplica) => servedByReplica,
      "the writer's read of the endpoint to be served by the replica",
    );
    await pair.pauseReplay();
    try {
      const changed = await a.request('PATCH', path, { key: WRITER, body: { description: 'after' } });
      assert.equal(changed.status, 200);
      const own = await description(b, WRITER);
      assert.equal(own.status, 200);
      assert.equal(own.json<{ description: string }>().description, 'after', 'the writer reads its PATCH');
      const replicaReadsBefore = stats(b).reads.replica;
      const stale = await description(b, READER);
      assert.equal(
        stale.json<{ description: string }>().description,
        'before',
        'another key reads the replica, which has not replayed the PATCH',
      );
      assert.equal(stats(b).reads.replica, replicaReadsBefore + 1);
    } finally {
      await pair.resumeReplay();
    }
  });

  test('when the replica is stopped, then every read on both nodes answers 200, and once it is back reads return to it', async () => {
    pair.stopReplica();
    try {
      for (let round = 0; round < 3; round++) {
        const answers = await Promise.all(
          [a, b].flatMap((node) =>
            [WRITER, READER].flatMap((key) => [
              node.request('GET', '/v1/pets?limit=5', { key, timeoutMs: ANSWER_MS }),
              node.request('GET', '/v1/store/orders?limit=5', { key, timeoutMs: ANSWER_MS }),
              node.request('GET', '/v1/events?limit=5', { key, timeoutMs: ANSWER_MS }),
            ]),
          ),
        );
        assert.deepEqual(
          answers.map((answer) => answer.status),
          answers.map(() => 200),
        );
      }
      assert.equal(stats(a).replicas[0]?.setAside, true);
      assert.equal(stats(b).replicas[0]?.setAside, true);
    } finally {
      await pair.startReplica();
    }
    for (const node of [a, b]) {
      const replicaReads = stats(node).reads.replica;
      await until(
        async () => {
          const answer = await node.request('GET', '/v1/pets?limit=1', { key: READER });
          assert.equal(answer.status, 200);
          return stats(node).reads.replica;
        },
        (reads) => reads > replicaReads,
        'reads to return to the replica once it is back',
      );
    }
  });

  test('when writers on two nodes race a feed reader served by the replica, and a live stream on its node, then neither skips an event', async () => {
    const start = await a.request('GET', '/v1/events?limit=100', { key: WRITER });
    const seenBefore = start.json<{ id: number }[]>();
    let after = seenBefore.length > 0 ? BigInt((seenBefore.at(-1) as { id: number }).id) : 0n;
    // Past every event already there.
    for (;;) {
      const page = await a.request('GET', `/v1/events?after=${after}&limit=100`, { key: WRITER });
      const events = page.exact<{ id: bigint }[]>();
      if (events.length === 0) break;
      after = BigInt((events.at(-1) as { id: bigint }).id);
    }
    const first = after;
    // The live stream too, on the same node: it reads on the primary (a catch-up from a replica could
    // end short of what the node had already read), and must skip nothing either.
    const stream = await TestStream.open(`${b.url}/v1/events?after=${first}`, { key: READER });
    assert.equal(stream.status, 200);
    let writing = true;
    const writer = async (node: TestServer) => {
      let created = 0;
      while (writing) {
        await Promise.all(
          Array.from({ length: 4 }, async () => {
            const answer = await node.request('POST', '/v1/pets', {
              key: WRITER,
              body: { name: 'Racer', categoryId: 2 },
            });
            assert.equal(answer.status, 201);
            created++;
          }),
        );
      }
      return created;
    };
    const seen: bigint[] = [];
    const replicaReadsBefore = stats(b).reads.replica;
    const read = async () => {
      const page = await b.request('GET', `/v1/events?after=${after}&limit=100`, { key: READER });
      assert.equal(page.status, 200);
      const events = page.exact<{ id: bigint | number }[]>().map((event) => BigInt(event.id));
      for (const id of events) {
        assert.ok(id > after, `event ${id} came after ${after}`);
        seen.push(id);
        after = id;
      }
      return events.length;
    };
    const writers = Promise.all([writer(a), writer(b)]);
    const until1500 = Date.now() + 1_500;
    while (Date.now() < until1500) await read();
    writing = false;
    const created = (await writers).reduce((sum, n) => sum + n, 0);
    // Every event the writers caused, as the primary has them, and the reader's, are the same ids.
    const primary = new pg.Client({ connectionString: schema.url });
    await primary.connect();
    const expected = (
      await primary
        .query<{ id: string }>(`SELECT id::text AS id FROM events WHERE id > ${first} ORDER BY events.id`)
        .finally(() => primary.end())
    ).rows.map((row) => BigInt(row.id));
    await until(read, () => seen.length >= expected.length, 'the reader to reach the last event');
    assert.equal(expected.length, created);
    assert.deepEqual(seen, expected);
    const streamed = (await stream.waitFor(expected.length)).map((message) => BigInt(message.lastEventId));
    stream.close();
    assert.deepEqual(streamed, expected);
    assert.ok(stats(b).reads.replica > replicaReadsBefore, 'the feed was read from the replica');
  });

  test('when DATABASE_REPLICA_URLS is set with SQLite, then the service refuses to start, in one line naming it', async () => {
    const line = oneLineFailure(
      await runInProcess(['serve'], {
        DATABASE_URL: 'sqlite::memory:',
        DATABASE_REPLICA_URLS: 'postgres://petstore@127.0.0.1:5433/petstore',
      }),
    );
    assert.match(line, /DATABASE_REPLICA_URLS/);
  });
});
