/**
 * The ceiling of PostgreSQL writes that record events (docs/capacity.md): `npm run bench -- write-ceiling
 * [--nodes 1,2,4] [--seconds 5] [--connections 64] [--postgres-url URL]`.
 *
 * Every transaction that records events takes one advisory lock (EVENT_ORDER_LOCK, for the feed's
 * no-skip promise) and holds it through its last statement and its commit, so those commits run one at
 * a time. For each count of `--role api` nodes (processes on this machine, one database), wrk sends
 * creates to every node at once (the connections split between them) for --seconds, while a connection
 * of its own samples pg_locks about every millisecond: the share of samples in which a transaction
 * holds the lock is its utilisation, and how many wait for it beside. From PostgreSQL's own statistics:
 * the commits (pg_stat_database) and the WAL flushes and their time (pg_stat_wal, with
 * track_wal_io_timing on for the database). Per commit, the lock is held utilisation × seconds ÷ commits;
 * one commit after another, that is a ceiling of 1 ÷ hold commits a second, and at the creates a commit
 * grouped, creates a second = creates/s ÷ utilisation. Prints one Markdown table.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { EVENT_ORDER_LOCK } from '../src/storage/postgres/events.js';
import { startRole } from './delivery-lag.js';
import { ensureWrk, type LoadResult, runLoad } from './load.js';
import { BENCH_POSTGRES_URL, benchDatabase, CLI, cpuMicros, serviceEnv, stop } from './processes.js';

const { values: args } = parseArgs({
  options: {
    nodes: { type: 'string', default: '1,2,4' },
    seconds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '64' },
    'postgres-url': { type: 'string', default: BENCH_POSTGRES_URL },
  },
});
const seconds = Number(args.seconds);
const connections = Number(args.connections);
const KEY = 'write-ceiling-key-0123456789abcdef';
const log = (message: string) => process.stderr.write(`write-ceiling: ${message}\n`);

/** pg_locks names a bigint advisory lock by its high and low 32 bits, objsubid 1. */
const LOCK_CLASS = Number(EVENT_ORDER_LOCK >> 32n);
const LOCK_OBJECT = Number(EVENT_ORDER_LOCK & 0xffff_ffffn);

interface Sampled {
  samples: number;
  held: number;
  waiting: number;
}

/** Samples the lock until `until` resolves: how often it was held, and how many waited for it. */
async function sampleLock(url: string, until: Promise<unknown>): Promise<Sampled> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  let done = false;
  void until.finally(() => {
    done = true;
  });
  const result: Sampled = { samples: 0, held: 0, waiting: 0 };
  try {
    while (!done) {
      const { rows } = await client.query<{ held: number; waiting: number }>({
        name: 'event_lock_sample',
        text: `SELECT count(*) FILTER (WHERE granted)::int AS held, count(*) FILTER (WHERE NOT granted)::int AS waiting
               FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 1`,
        values: [LOCK_CLASS, LOCK_OBJECT],
      });
      const [row] = rows;
      result.samples += 1;
      result.held += row?.held ?? 0;
      result.waiting += row?.waiting ?? 0;
      await sleep(1);
    }
  } finally {
    await client.end();
  }
  return result;
}

interface Counters {
  commits: number;
  flushes: number;
  flushMs: number;
  events: number;
}

async function counters(client: pg.Client, database: string): Promise<Counters> {
  const { rows } = await client.query<{ commits: string; flushes: string; flush_ms: number; events: string }>(
    `SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = $1)::text AS commits,
            (SELECT wal_sync FROM pg_stat_wal)::text AS flushes,
            (SELECT wal_sync_time FROM pg_stat_wal) AS flush_ms,
            (SELECT count(*) FROM events)::text AS events`,
    [database],
  );
  const [row] = rows;
  if (!row) throw new Error('no statistics');
  return {
    commits: Number(row.commits),
    flushes: Number(row.flushes),
    flushMs: row.flush_ms,
    events: Number(row.events),
  };
}

interface Row {
  nodes: number;
  createsPerSecond: number;
  non2xx: number;
  nodeCpuPerCreate: number;
  wrkCpuShare: number;
  commitsPerSecond: number;
  createsPerCommit: number;
  utilisation: number;
  waiting: number;
  holdMs: number;
  flushMs: number;
}

async function measure(nodes: number): Promise<Row> {
  const database = await benchDatabase('postgres', args['postgres-url'], 'petstore_write_ceiling');
  const name = new URL(database.url).pathname.slice(1);
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  const started: Awaited<ReturnType<typeof startRole>>[] = [];
  try {
    // The commits' WAL flushes, timed by the backends that make them.
    await admin.query(`ALTER DATABASE "${name}" SET track_wal_io_timing = on`);
    const env = serviceEnv(KEY, database.url);
    for (let i = 0; i < nodes; i++) started.push(await startRole(CLI, 'api', env, KEY));
    // A second of creates first, so pools, plans and the group commit are warm.
    await Promise.all(started.map((node) => load(node.url, 1, nodes)));
    await admin.query("SELECT pg_stat_reset_shared('wal')");
    await sleep(600); // pg_stat_database is sent by the backends about every half second
    const before = await counters(admin, name);
    const cpuBefore = started.map((node) => cpuMicros(node.child.pid as number));
    const loads = Promise.all(started.map((node) => load(node.url, seconds, nodes)));
    const [sampled, results] = await Promise.all([sampleLock(args['postgres-url'], loads), loads]);
    const cpu = started.reduce(
      (sum, node, i) => sum + cpuMicros(node.child.pid as number) - (cpuBefore[i] ?? 0),
      0,
    );
    await sleep(600);
    const after = await counters(admin, name);
    const creates = results.reduce((sum, r) => sum + r.requests, 0);
    const wall = Math.max(...results.map((r) => r.wallMicros)) / 1e6;
    const commits = after.commits - before.commits;
    const utilisation = sampled.held / sampled.samples;
    return {
      nodes,
      createsPerSecond: results.reduce((sum, r) => sum + r.requestsPerSecond, 0),
      non2xx: results.reduce((sum, r) => sum + r.non2xx, 0),
      nodeCpuPerCreate: cpu / creates,
      wrkCpuShare: results.reduce((sum, r) => sum + r.generatorCpuMicros, 0) / (cpu || 1),
      commitsPerSecond: commits / wall,
      createsPerCommit: (after.events - before.events) / commits,
      utilisation,
      waiting: sampled.waiting / sampled.samples,
      holdMs: (utilisation * wall * 1000) / commits,
      flushMs: (after.flushMs - before.flushMs) / Math.max(1, after.flushes - before.flushes),
    };
  } finally {
    for (const node of started) await stop(node.child);
    await admin.end();
    await database.drop();
  }
}

/** Creates to one node's `url` for `forSeconds`, over its share of the connections. */
const load = (url: string, forSeconds: number, nodes: number): Promise<LoadResult> =>
  runLoad({
    url,
    key: KEY,
    connections: Math.max(1, Math.round(connections / nodes)),
    seconds: forSeconds,
    mix: [{ kind: 'create' }],
  });

ensureWrk(log);
const rows: Row[] = [];
for (const n of args.nodes.split(',').map(Number)) {
  log(`${n} node(s), ${seconds} s of creates over ${connections} connections`);
  rows.push(await measure(n));
}
const f = (x: number, digits = 0) => x.toFixed(digits);
console.log(
  "| Nodes | Creates/s | Node CPU µs a create | wrk CPU ÷ nodes' | Commits/s | Creates a commit | Lock held | Waiting for it | Held a commit | WAL flush | Ceiling: commits/s | Ceiling: creates/s at this grouping |",
);
console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const r of rows)
  console.log(
    `| ${r.nodes} | ${f(r.createsPerSecond)}${r.non2xx ? ` (${r.non2xx} not 2xx)` : ''} | ${f(r.nodeCpuPerCreate)} | ${f(r.wrkCpuShare, 2)} | ${f(r.commitsPerSecond)} | ${f(r.createsPerCommit, 1)} | ${f(r.utilisation * 100)} % | ${f(r.waiting, 2)} | ${f(r.holdMs, 2)} ms | ${f(r.flushMs, 2)} ms | ${f(1000 / r.holdMs)} | ${f(r.createsPerSecond / r.utilisation)} |`,
  );
