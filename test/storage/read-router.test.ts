import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import type pg from 'pg';
import { runInReadScope } from '../../src/storage/postgres/read-scope.js';
import { ReadRouter } from '../../src/storage/postgres/replicas.js';
import { parseLsn } from '../../src/storage/postgres/transaction.js';
import { MemoryWritePositions, type WritePositions } from '../../src/storage/postgres/write-positions.js';
import type { ReplicaChange } from '../../src/storage/replica-reads.js';

// The router's choices with servers played by stand-ins: what a probe answers, and who answered a read.
// The real thing, against a real primary and replica: read-replicas.test.ts.

const lsn = (n: number) => `0/${n.toString(16).toUpperCase()}`;

class FakeServer {
  position = 0x1000;
  failing = false;
  /** An error of the statement, not of the server (SQLSTATE 42P01, undefined_table), for reads only. */
  statementFails = false;
  reads = 0;
  ended = false;
  constructor(readonly role: 'primary' | 'replica') {}
  async query(config: pg.QueryConfig | string) {
    const text = typeof config === 'string' ? config : config.text;
    if (this.failing) throw Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' });
    if (text.includes('pg_current_wal_lsn')) return { rows: [{ lsn: lsn(this.position) }] };
    if (text.includes('pg_last_wal_replay_lsn'))
      return { rows: [{ standby: true, replayed: lsn(this.position) }] };
    this.reads++;
    if (this.statementFails) throw Object.assign(new Error('relation does not exist'), { code: '42P01' });
    return { rows: [{ from: this.role }] };
  }
  async end() {
    this.ended = true;
  }
}

const MAX_LAG_MS = 100;
const routers: ReadRouter[] = [];
after(() => Promise.all(routers.map((router) => router.close())));

async function setUp(positions?: (clock: () => number) => WritePositions) {
  const primary = new FakeServer('primary');
  const replica = new FakeServer('replica');
  let clock = 1_000_000;
  const changes: ReplicaChange[] = [];
  const router = new ReadRouter({
    primary: primary as unknown as pg.Pool,
    replicas: [{ url: 'postgres://u:secret@replica-1:5432/petstore', pool: replica as unknown as pg.Pool }],
    positions: (positions ?? ((now) => new MemoryWritePositions(30_000, now)))(() => clock),
    maxLagMs: MAX_LAG_MS,
    now: () => clock,
  });
  router.watch((change) => changes.push(change));
  routers.push(router);
  await router.start();
  /** Lets the router probe again (its timer is real: a quarter of the bound, plus up to a half; this waits 8 quarters). */
  const probe = async (ms = 0) => {
    clock += ms;
    await new Promise((resolve) => setTimeout(resolve, MAX_LAG_MS * 2));
  };
  const read = async (key: string, replicaReads = true) => {
    const { rows } = await runInReadScope({ key, replicaReads }, () => router.query('SELECT 1'));
    return (rows[0] as { from: string }).from;
  };
  return { primary, replica, router, changes, probe, read };
}

test('when a read is outside any request, or a write request, then the primary answers it', async () => {
  const { router, read } = await setUp();
  assert.equal(((await router.query('SELECT 1')).rows[0] as { from: string }).from, 'primary');
  assert.equal(await read('k', false), 'primary');
  assert.equal(await read('k', true), 'replica');
});

test('when a key wrote past what the replica replayed, then its reads go to the primary until the replica replays it', async () => {
  const { primary, replica, router, probe, read } = await setUp();
  primary.position = 0x2000;
  await router.wrote('writer', parseLsn(lsn(0x2000)));
  assert.equal(await read('writer'), 'primary');
  assert.equal(await read('someone else'), 'replica');
  replica.position = 0x2000;
  await probe();
  assert.equal(await read('writer'), 'replica');
});

test('when the replica falls further behind than the bound, then nobody reads from it, and once caught up everybody does', async () => {
  const { primary, replica, router, probe, read } = await setUp();
  primary.position = 0x3000; // the primary moves on, the replica does not
  await probe();
  assert.equal(await read('reader'), 'replica', 'just behind: within the bound');
  await probe(MAX_LAG_MS + 1);
  assert.equal(await read('reader'), 'primary');
  assert.ok((router.stats().replicas[0]?.lagSeconds ?? 0) * 1000 > MAX_LAG_MS);
  replica.position = 0x3000;
  await probe();
  assert.equal(await read('reader'), 'replica');
  assert.equal(router.stats().replicas[0]?.lagSeconds, 0);
});

test("when the primary stops answering the probe, then a replica level with its last answer counts as behind by that answer's age, and past the bound it is not read from", async () => {
  const { primary, router, probe } = await setUp();
  await probe();
  assert.equal(router.stats().replicas[0]?.lagSeconds, 0, 'level with the primary, which answers');
  primary.failing = true; // still committing, perhaps: its position is no longer known
  await probe(MAX_LAG_MS + 1);
  assert.ok(
    (router.stats().replicas[0]?.lagSeconds ?? 0) * 1000 > MAX_LAG_MS,
    `lag ${router.stats().replicas[0]?.lagSeconds} s`,
  );
});

test('when the replica fails, then the read is answered by the primary, the replica is set aside (told once) and used again once a probe finds it', async () => {
  const { replica, router, changes, probe, read } = await setUp();
  replica.failing = true;
  assert.equal(await read('reader'), 'primary');
  assert.equal(await read('reader'), 'primary');
  await probe();
  assert.deepEqual(
    changes.map(({ replica: name, setAside }) => ({ name, setAside })),
    [{ name: 'replica-1:5432/petstore', setAside: true }],
  );
  assert.equal(router.stats().replicas[0]?.setAside, true);
  replica.failing = false;
  await probe(3_000);
  await probe();
  assert.equal(await read('reader'), 'replica');
  assert.deepEqual(
    changes.map(({ setAside }) => setAside),
    [true, false],
  );
  assert.deepEqual(router.stats().reads, { primary: 2, replica: 1 });
});

test("when a read's statement fails on the replica, then the primary answers it and the replica is not set aside", async () => {
  const { replica, router, changes, read } = await setUp();
  replica.statementFails = true;
  assert.equal(await read('reader'), 'primary');
  replica.statementFails = false;
  assert.equal(await read('reader'), 'replica');
  assert.deepEqual(changes, []);
  assert.equal(router.stats().replicas[0]?.setAside, false);
  assert.deepEqual(router.stats().reads, { primary: 1, replica: 1 });
});

test("when a request reads several times, then its key's position is looked up once, and every read is judged against it", async () => {
  const lookups: string[] = [];
  const { router } = await setUp((now) => {
    const positions = new MemoryWritePositions(30_000, now);
    return Object.assign(Object.create(positions) as WritePositions, {
      get: (key: string) => {
        lookups.push(key);
        return positions.get(key);
      },
    });
  });
  const from = (result: pg.QueryResult) => (result.rows[0] as { from: string }).from;
  const answered = await runInReadScope({ key: 'reader', replicaReads: true }, async () => [
    from(await router.query('SELECT 1')),
    from(await router.query('SELECT 2')),
    from(await router.query('SELECT 3')),
  ]);
  assert.deepEqual(answered, ['replica', 'replica', 'replica']);
  assert.deepEqual(lookups, ['reader']);
  await runInReadScope({ key: 'reader', replicaReads: true }, () => router.query('SELECT 1'));
  assert.deepEqual(lookups, ['reader', 'reader']);
});

test('when positions are recorded out of order, then the larger stays', async () => {
  let clock = 0;
  const positions = new MemoryWritePositions(1_000, () => clock);
  await positions.record('k', 20n);
  await positions.record('k', 10n);
  assert.equal(await positions.get('k'), 20n);
  clock = 1_001;
  assert.equal(await positions.get('k'), undefined, 'expired');
  assert.equal(parseLsn('16/B374D848'), 0x16b374d848n);
});

test('when a replica is set aside by the first probe, before anyone listens, then a listener added later is told of it at once, by name', async () => {
  const primary = new FakeServer('primary');
  const replica = new FakeServer('replica');
  replica.failing = true;
  const router = new ReadRouter({
    primary: primary as unknown as pg.Pool,
    replicas: [{ url: 'postgres://u:secret@replica-9:5433/petstore', pool: replica as unknown as pg.Pool }],
    positions: new MemoryWritePositions(30_000),
    maxLagMs: MAX_LAG_MS,
  });
  routers.push(router);
  await router.start();
  const changes: ReplicaChange[] = [];
  router.watch((change) => changes.push(change));
  assert.deepEqual(
    changes.map(({ replica: name, setAside, error }) => ({
      name,
      setAside,
      error: (error as Error).message,
    })),
    [{ name: 'replica-9:5433/petstore', setAside: true, error: 'connection refused' }],
  );
});
