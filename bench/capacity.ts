/**
 * The capacity model's figures (docs/capacity.md): `npm run bench -- capacity [--seconds 3] [--size 10000]`.
 *
 * On a real primary and streaming replica (support/postgres-replication.ts), one `petstore serve` with
 * the replica in DATABASE_REPLICA_URLS and key positions in the local Redis. For each operation, alone,
 * for --seconds under wrk (bench/load.ts): the node's CPU per request (/proc), and from PostgreSQL's own
 * statistics the statements, rows and execution time per request on the primary and on the replica
 * (pg_stat_statements) and the WAL bytes per request (pg_stat_wal). Then the check: two nodes, each
 * with a reader key (reads only) and a writer key (creates only) under load at once; the model's
 * figures for the rates they reached, side by side with the measured ones. Prints JSON and Markdown.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createDatabase } from '../support/postgres-admin.js';
import { replicationPair } from '../support/postgres-replication.js';
import { ensureWrk, type LoadResult, runLoad } from './load.js';
import { CLI, cpuMicros, freePort, ROOT, seedDatabase, serviceEnv, stop, waitUntilUp } from './processes.js';
import type { TrafficPart } from './scenarios.js';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '3' },
    size: { type: 'string', default: '10000' },
    connections: { type: 'string', default: '16' },
  },
});
const seconds = Number(args.seconds);
const size = Number(args.size);
const connections = Number(args.connections);
const READER = `reader-${randomBytes(12).toString('hex')}`;
const WRITER = `writer-${randomBytes(12).toString('hex')}`;
const log = (message: string) => process.stderr.write(`capacity: ${message}\n`);

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

interface Statements {
  calls: number;
  rows: number;
  /** Milliseconds of execution. */
  execMs: number;
}

/** The service's statements since the last reset (the probes' and this script's own left out). */
async function statements(url: string): Promise<Statements> {
  const [row] = await query<{ calls: string; rows: string; ms: string }>(
    url,
    `SELECT coalesce(sum(calls), 0)::text AS calls, coalesce(sum(rows), 0)::text AS rows,
            coalesce(sum(total_exec_time), 0)::text AS ms
     FROM pg_stat_statements
     WHERE query !~* 'pg_stat|pg_current_wal_lsn|pg_last_wal_replay_lsn|pg_is_in_recovery|^(BEGIN|COMMIT)'`,
  );
  return { calls: Number(row?.calls), rows: Number(row?.rows), execMs: Number(row?.ms) };
}

async function walBytes(url: string): Promise<number> {
  const [row] = await query<{ bytes: string }>(url, 'SELECT wal_bytes::text AS bytes FROM pg_stat_wal');
  return Number(row?.bytes);
}

/** CPU (µs) used so far by a PostgreSQL server: its postmaster and the processes it started that run. */
function serverCpuMicros(directory: string): number {
  return cpuMicros(Number(readFileSync(join(directory, 'postmaster.pid'), 'utf8').split('\n')[0]));
}

async function reset(primaryUrl: string, replicaUrl: string): Promise<void> {
  await query(primaryUrl, "SELECT pg_stat_statements_reset(), pg_stat_reset_shared('wal')");
  await query(replicaUrl, 'SELECT pg_stat_statements_reset()');
}

interface Node {
  url: string;
  child: ChildProcess;
}

async function startNode(env: NodeJS.ProcessEnv): Promise<Node> {
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, 'serve'], {
    cwd: ROOT,
    env: { ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  await waitUntilUp(url, child, READER);
  return { url, child };
}

export interface OperationCost {
  operation: string;
  requestsPerSecond: number;
  /** CPU microseconds of the node per request. */
  nodeCpuMicros: number;
  primary: Statements;
  replica: Statements;
  /** Per request. */
  walBytes: number;
  /** CPU microseconds per request of the primary's and the replica's server processes (all of them). */
  primaryCpuMicros: number;
  replicaCpuMicros: number;
  non2xx: number;
}

const perRequest = (s: Statements, n: number): Statements => ({
  calls: s.calls / n,
  rows: s.rows / n,
  execMs: s.execMs / n,
});

async function main(): Promise<void> {
  ensureWrk(log);
  const pair = await replicationPair();
  const database = await createDatabase(pair.primaryUrl, 'petstore_capacity');
  const replicaUrl = pair.onReplica(database.url);
  const nodes: Node[] = [];
  try {
    await query(database.url, 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const env = serviceEnv(READER, database.url, {
      PETSTORE_API_KEYS: `${READER},${WRITER}`,
      DATABASE_REPLICA_URLS: replicaUrl,
      REDIS_URL: 'redis://127.0.0.1:6379',
    });
    log(`seeding ${size} animals`);
    seedDatabase(env, size);
    await query(database.url, 'ANALYZE');
    nodes.push(await startNode(env));
    const [node] = nodes as [Node];
    const ids = Array.from({ length: 500 }, () => 1 + Math.floor(Math.random() * size));
    const operations: { name: string; key: string; mix: TrafficPart[] }[] = [
      {
        name: 'getPet (GET /v1/pets?id=…)',
        key: READER,
        mix: [{ kind: 'get', paths: ids.map((id) => `/v1/pets?id=${id}`) }],
      },
      {
        name: 'listPets (20 a page)',
        key: READER,
        mix: [{ kind: 'get', paths: ['/v1/pets?limit=20', '/v1/pets?limit=20&status=available'] }],
      },
      { name: 'createPet', key: WRITER, mix: [{ kind: 'create' }] },
      { name: 'placeOrder', key: WRITER, mix: [{ kind: 'place' }] },
      {
        name: 'listEvents (20 a page)',
        key: READER,
        mix: [{ kind: 'get', paths: ['/v1/events?limit=20', '/v1/events?limit=20&after=100'] }],
      },
    ];
    const costs: OperationCost[] = [];
    for (const operation of operations) {
      // The replica replays what came before: each operation starts on a replica in step.
      await pair.resumeReplay();
      await reset(database.url, replicaUrl);
      const cpuBefore = cpuMicros(node.child.pid as number);
      const serversBefore = [
        serverCpuMicros(pair.directories.primary),
        serverCpuMicros(pair.directories.replica),
      ];
      const load = await runLoad({
        url: node.url,
        key: operation.key,
        connections,
        seconds,
        mix: operation.mix,
      });
      const cpu = cpuMicros(node.child.pid as number) - cpuBefore;
      const servers = [
        serverCpuMicros(pair.directories.primary) - (serversBefore[0] as number),
        serverCpuMicros(pair.directories.replica) - (serversBefore[1] as number),
      ];
      const n = load.requests;
      costs.push({
        operation: operation.name,
        requestsPerSecond: load.requestsPerSecond,
        nodeCpuMicros: cpu / n,
        primary: perRequest(await statements(database.url), n),
        replica: perRequest(await statements(replicaUrl), n),
        walBytes: (await walBytes(database.url)) / n,
        primaryCpuMicros: (servers[0] as number) / n,
        replicaCpuMicros: (servers[1] as number) / n,
        non2xx: load.non2xx,
      });
      log(
        `${operation.name}: ${Math.round(load.requestsPerSecond)}/s, ${Math.round(cpu / n)} µs CPU a request`,
      );
    }

    // The check: two nodes, readers and writers at once.
    nodes.push(await startNode(env));
    await pair.resumeReplay();
    await reset(database.url, replicaUrl);
    const cpuBefore = nodes.map((each) => cpuMicros(each.child.pid as number));
    const serversBefore = [
      serverCpuMicros(pair.directories.primary),
      serverCpuMicros(pair.directories.replica),
    ];
    const readers = Math.max(1, Math.round((connections * 3) / 4));
    const writers = Math.max(1, connections - readers);
    const loads: LoadResult[] = await Promise.all(
      nodes.flatMap((each) => [
        runLoad({
          url: each.url,
          key: READER,
          connections: readers / 2,
          seconds,
          mix: operations[0]?.mix as TrafficPart[],
        }),
        runLoad({
          url: each.url,
          key: WRITER,
          connections: Math.max(1, writers / 2),
          seconds,
          mix: [{ kind: 'create' }],
        }),
      ]),
    );
    const cpu = nodes.reduce(
      (sum, each, i) => sum + cpuMicros(each.child.pid as number) - (cpuBefore[i] as number),
      0,
    );
    const reads = (loads[0]?.requests ?? 0) + (loads[2]?.requests ?? 0);
    const writes = (loads[1]?.requests ?? 0) + (loads[3]?.requests ?? 0);
    const [get, , create] = costs as [OperationCost, OperationCost, OperationCost];
    const measured = {
      reads,
      writes,
      readsPerSecond: reads / seconds,
      writesPerSecond: writes / seconds,
      nodeCpuSeconds: cpu / 1e6,
      primaryCpuSeconds: (serverCpuMicros(pair.directories.primary) - (serversBefore[0] as number)) / 1e6,
      replicaCpuSeconds: (serverCpuMicros(pair.directories.replica) - (serversBefore[1] as number)) / 1e6,
      walBytes: await walBytes(database.url),
      primaryStatements: (await statements(database.url)).calls,
      replicaStatements: (await statements(replicaUrl)).calls,
    };
    const predicted = {
      nodeCpuSeconds: (reads * get.nodeCpuMicros + writes * create.nodeCpuMicros) / 1e6,
      primaryCpuSeconds: (reads * get.primaryCpuMicros + writes * create.primaryCpuMicros) / 1e6,
      replicaCpuSeconds: (reads * get.replicaCpuMicros + writes * create.replicaCpuMicros) / 1e6,
      walBytes: writes * create.walBytes,
      primaryStatements: writes * create.primary.calls,
      replicaStatements: reads * get.replica.calls,
    };
    const result = {
      date: new Date().toISOString(),
      seconds,
      size,
      connections,
      costs,
      check: { measured, predicted },
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(render(result));
  } finally {
    await Promise.all(nodes.map((each) => stop(each.child)));
    await database.drop();
  }
}

const f = (n: number, digits = 1) => n.toLocaleString('en-US', { maximumFractionDigits: digits });

function render(result: {
  costs: OperationCost[];
  check: { measured: Record<string, number>; predicted: Record<string, number> };
}): string {
  const lines = [
    '| Operation | Requests/s (one node) | Node CPU µs/request | Primary: statements, rows, ms | Replica: statements, rows, ms | WAL bytes/request | Primary CPU µs/request | Replica CPU µs/request |',
    '|---|---|---|---|---|---|---|---|',
    ...result.costs.map(
      (c) =>
        `| ${c.operation} | ${f(c.requestsPerSecond, 0)} | ${f(c.nodeCpuMicros, 0)} | ${f(c.primary.calls, 2)}, ${f(c.primary.rows, 2)}, ${f(c.primary.execMs, 3)} | ${f(c.replica.calls, 2)}, ${f(c.replica.rows, 2)}, ${f(c.replica.execMs, 3)} | ${f(c.walBytes, 0)} | ${f(c.primaryCpuMicros, 0)} | ${f(c.replicaCpuMicros, 0)} |`,
    ),
    '',
    '| Check (two nodes) | Predicted | Measured |',
    '|---|---|---|',
    ...Object.keys(result.check.predicted).map(
      (name) =>
        `| ${name} | ${f(result.check.predicted[name] as number, 2)} | ${f(result.check.measured[name] as number, 2)} |`,
    ),
    `| reads, writes | | ${f(result.check.measured.reads as number, 0)}, ${f(result.check.measured.writes as number, 0)} |`,
  ];
  return `${lines.join('\n')}\n`;
}

await main();
process.exit(0);
