/**
 * The benchmark's scenarios (`npm run bench -- <scenario>` runs one; bench/main.ts is the way in to every
 * tool): `npm run bench [-- --quick] [--workers N] [--backends sqlite,postgres] [--sizes 10000,1000000]
 * [--seconds 10] [--connections 32] [--scenarios list,get,…] [--log-level info] [--env NAME=VALUE …]
 * [--stored-key] [--tracing off,100%,1%] [--pin] [--neighbour] [--rounds N] [--replica]`; `--replica` runs
 * the PostgreSQL targets on a primary and a streaming replica made for the run, reads served by the
 * replica (DATABASE_REPLICA_URLS); `--neighbour` keeps the last CPU
 * busy (a busy loop) for the whole run; `--rounds N` measures each scenario in N turns, every target
 * --seconds in each, combined per target (bench/rounds.ts); `--tracing` runs the service once per mode, side by side:
 * tracing off, on with every trace kept, on with 1% kept (spans exported over OTLP/HTTP to a sink in
 * this process that answers 200 at once); `--stored-key` sends a key made with `petstore keys create` (looked up, its expiry
 * checked and its use noted for `keys list`) instead of one from PETSTORE_API_KEYS (answered in memory);
 * `npm run bench -- --render bench/results/<run>.json` rewrites docs/benchmarks-runs.md from a saved run.
 *
 * Each target is its own process: the reference (bench/reference-server.ts, bare node:http with fixed
 * bytes) and the real `petstore serve` on each backend, seeded through the bulk path (`petstore seed`,
 * i.e. createMany, not HTTP), and on SQLite a hand-written Express + better-sqlite3 version of the same
 * operations (bench/express-baseline.ts). Load comes from wrk (bench/load.ts: C, one thread, its own
 * process) on 127.0.0.1 only, for a bounded time; its CPU is measured beside the target's, and a ratio is
 * marked not valid when the generator was the limit. For every scenario the reference and the services run back to back, so the
 * ratios compare runs made under the same conditions on a shared machine. Results go to
 * bench/results/*.json (not committed) and docs/benchmarks-runs.md: a full run rewrites its main table, a
 * narrower one (--quick) the section of the latest partial run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism, cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config/config.js';
import { CursorCodec } from '../src/domain/paging.js';
import { openStorage } from '../src/storage/open-storage.js';
import { adminQuery, createDatabase, type ThrowawayDatabase } from '../support/postgres-admin.js';
import { replicationPair } from '../support/postgres-replication.js';
import { startServe } from '../support/service-process.js';
import {
  type DeliveryLagResult,
  type Layout,
  measureDeliveryLag,
  renderDeliveryLag,
} from './delivery-lag.js';
import { ensureWrk, runLoad } from './load.js';
import {
  BENCH_POSTGRES_URL,
  serviceEnv as baseServiceEnv,
  CLI,
  cpuMicros,
  definedOnly,
  freePort,
  LAST_CPU,
  pinProcess,
  ROOT,
  residentBytes,
  runToEnd,
  seedDatabase,
  sqliteDatabase,
  startNeighbour,
  startScript,
  stop,
  TSX,
  waitUntilUp as waitUntilUpWith,
} from './processes.js';
import { type Row, type Run, renderHeadline, renderReport } from './report.js';
import { combineWindows, type Window } from './rounds.js';
import {
  type Dataset,
  type LoadSpec,
  SCENARIOS,
  type Scenario,
  trafficFor,
  WEBHOOK_ENDPOINTS,
} from './scenarios.js';

const KEY = `bench-${randomBytes(16).toString('hex')}`;

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    quick: { type: 'boolean', default: false },
    workers: { type: 'string', default: '1' },
    backends: { type: 'string', default: 'sqlite,postgres' },
    sizes: { type: 'string' },
    seconds: { type: 'string' },
    connections: { type: 'string', default: '32' },
    /** Pins wrk to the last CPU and each target to the others (processes.ts: pinned, pinProcess). */
    pin: { type: 'boolean', default: false },
    /** Keeps the last CPU busy with a CPU-bound process for the whole run: a machine that is not quiet. */
    neighbour: { type: 'boolean', default: false },
    /** The targets of a scenario take turns this many times, each measured --seconds a turn. */
    rounds: { type: 'string', default: '1' },
    scenarios: { type: 'string', default: [...SCENARIOS, 'delivery-lag'].join(',') },
    /** delivery-lag's layouts of processes: `all` (one --role all), `split` (--role api + --role deliver). */
    layouts: { type: 'string', default: 'all,split' },
    /**
     * delivery-lag's paced phase at this many creates a second instead of each layout's own T/2, so
     * layouts are compared at one load (their lag and create p99 side by side).
     */
    'paced-rate': { type: 'string' },
    /** The CLI delivery-lag starts: another build's dist/cli/main.js, measured the same way. */
    cli: { type: 'string' },
    'log-level': { type: 'string' },
    env: { type: 'string', multiple: true, default: [] },
    /** Load with a stored key (keys create) rather than a configured one (PETSTORE_API_KEYS). */
    'stored-key': { type: 'boolean', default: false },
    /** Tracing modes to run the service in, side by side: off, 100% (every trace), 1%. */
    tracing: { type: 'string', default: 'off' },
    /** Re-renders docs/benchmarks-runs.md from a saved results file instead of measuring. */
    render: { type: 'string' },
    /** Renders the headline table from two saved runs: a quiet one, then one with --neighbour. */
    headline: { type: 'string' },
    /**
     * PostgreSQL targets on a primary and a streaming replica of it (support/postgres-replication.ts),
     * the replica in DATABASE_REPLICA_URLS: the read scenarios are served by it.
     */
    replica: { type: 'boolean', default: false },
    'postgres-url': { type: 'string', default: BENCH_POSTGRES_URL },
  },
});
const quick = args.quick as boolean;
const pin = args.pin as boolean;
/** With --pin: wrk runs on the last CPU, every target on the others. */
const GENERATOR_CPU = LAST_CPU;
const TARGET_CPUS = availableParallelism() > 2 ? `0-${availableParallelism() - 2}` : '0';
const workers = Number(args.workers);
const connections = Number(args.connections);
const seconds = Number(args.seconds ?? (quick ? 2 : 10));
const rounds = Number(args.rounds);
if (!Number.isSafeInteger(rounds) || rounds < 1) throw new Error('--rounds takes a whole number, 1 or more');
const sizes = (args.sizes ?? (quick ? '10000' : '10000,1000000')).split(',').map(Number);
const wanted = (args.backends as string).split(',');
const scenarios = SCENARIOS.filter((scenario) => (args.scenarios as string).split(',').includes(scenario));
/** How the service traces in each of its runs: not at all, or on, keeping every trace or 1% of them. */
const TRACING_MODES = {
  off: undefined,
  '100%': { OTEL_TRACES_SAMPLER: 'parentbased_always_on' },
  '1%': { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' },
} as const;
type TracingMode = keyof typeof TRACING_MODES;
const tracingModes = (args.tracing as string).split(',').map((mode) => {
  if (!(mode in TRACING_MODES)) throw new Error(`--tracing: ${mode} is not one of off, 100%, 1%`);
  return mode as TracingMode;
});

function log(message: string): void {
  process.stderr.write(`bench: ${message}\n`);
}

/** The service's environment, with this run's --log-level and --env settings. */
/** With --replica: the replica's URL for a database on the primary. */
let replicaOf: ((url: string) => string) | undefined;

function serviceEnv(databaseUrl: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return baseServiceEnv(KEY, databaseUrl, {
    ...(replicaOf && databaseUrl.startsWith('postgres')
      ? { DATABASE_REPLICA_URLS: replicaOf(databaseUrl) }
      : {}),
    ...(args['log-level'] ? { LOG_LEVEL: args['log-level'] as string } : {}),
    // --env NAME=VALUE, repeatable: service settings to compare, e.g. --env LOG_REQUESTS=false.
    ...Object.fromEntries((args.env as string[]).map((pair) => pair.split(/=(.*)/s).slice(0, 2))),
    ...extra,
  });
}

const waitUntilUp = (url: string, child: ChildProcess) => waitUntilUpWith(url, child, KEY);

interface Target {
  name: string;
  /** The key the load sends. */
  key: string;
  backend: Row['backend'];
  size: number;
  url: string;
  child: ChildProcess;
  stop(): Promise<unknown>;
  dataset: Dataset;
}

/** With --pin, moves a target (every thread of it and of its children) to TARGET_CPUS. */
function pinTarget(pid: number): void {
  if (pin) pinProcess(pid, TARGET_CPUS);
}

/** `/v1/pets?limit=20&cursor=…` pages at random depths, as a client following `next` would reach them. */
async function deepPages(databaseUrl: string, size: number): Promise<string[]> {
  const storage = await openStorage(loadConfig({ DATABASE_URL: databaseUrl }));
  try {
    const codec = new CursorCodec(await storage.sharedSecret('cursor'));
    return Array.from({ length: 1000 }, () => {
      const afterId = BigInt(Math.floor(Math.random() * Math.max(1, size - 40)));
      return `/v1/pets?limit=20&cursor=${codec.encode({ afterId, status: undefined })}`;
    });
  } finally {
    await storage.close();
  }
}

async function newDatabase(backend: 'sqlite' | 'postgres'): Promise<ThrowawayDatabase> {
  if (backend === 'sqlite') return sqliteDatabase();
  if (args.replica) {
    const pair = await replicationPair();
    replicaOf = pair.onReplica;
    return createDatabase(pair.primaryUrl, 'petstore_bench');
  }
  return createDatabase(args['postgres-url'] as string, 'petstore_bench');
}

/**
 * Where traced runs export their spans: an OTLP/HTTP sink in this process that reads each body and
 * answers 200, as a collector does (its CPU is not the target's).
 */
async function otlpSink(): Promise<string> {
  sink ??= await new Promise<Server>((resolve) => {
    const server = createHttpServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    });
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
  return `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
}

let sink: Server | undefined;

async function startService(
  backend: 'sqlite' | 'postgres',
  size: number,
  database: ThrowawayDatabase,
  tracing: TracingMode = 'off',
  seed = true,
): Promise<Target> {
  if (seed) {
    log(`${backend}: seeding ${size} pets through the bulk path (petstore seed)`);
    seedDatabase(serviceEnv(database.url), size);
  }
  const key = args['stored-key']
    ? runToEnd(process.execPath, [CLI, 'keys', 'create', '--name', 'bench'], serviceEnv(database.url)).trim()
    : KEY;
  // Logs are produced (their cost is part of the measurement) but not read.
  const port = await freePort();
  const traced = TRACING_MODES[tracing];
  const tracingEnv = traced ? { OTEL_EXPORTER_OTLP_ENDPOINT: await otlpSink(), ...traced } : {};
  const service = await startServe(
    definedOnly(serviceEnv(database.url, { PORT: String(port), ...tracingEnv })),
    {
      workers,
      entry: 'built',
      stdout: 'ignore',
    },
  );
  const { url, child } = service;
  await waitUntilUp(url, child);
  pinTarget(child.pid as number);
  const name = `${backend}${workers > 1 ? ` ×${workers} workers` : ''}${
    tracingModes.length > 1 || tracing !== 'off'
      ? `, tracing ${tracing === 'off' ? 'off' : `on ${tracing}`}`
      : ''
  }`;
  return {
    name,
    key,
    backend,
    size,
    url,
    child,
    stop: () => service.stop(),
    dataset: { size, deepPages: await deepPages(database.url, size) },
  };
}

async function load(target: Target, scenario: Scenario, duration: number): Promise<Window> {
  const spec: LoadSpec = {
    url: target.url,
    key: target.key,
    connections,
    seconds: duration,
    mix: trafficFor(scenario, target.dataset),
  };
  const endpoints = WEBHOOK_ENDPOINTS[scenario];
  const hook = endpoints ? await registerWebhooks(target, endpoints) : undefined;
  let peakRss = 0;
  const pid = target.child.pid as number;
  const cpuBefore = cpuMicros(pid);
  const receivedBefore = webhooksReceived;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, residentBytes(pid));
  }, 100);
  try {
    const result = await runLoad(spec, pin ? GENERATOR_CPU : undefined);
    return {
      ...result,
      peakRss: Math.max(peakRss, residentBytes(pid)),
      cpuMicros: cpuMicros(pid) - cpuBefore,
      ...(hook ? { delivered: webhooksReceived - receivedBefore } : {}),
    };
  } finally {
    clearInterval(sampler);
    await hook?.();
  }
}

/**
 * A receiver in this process (answering 204 at once) and `count` endpoints registered to it on the
 * target; resolves to what removes them. The reference has no webhooks: it is loaded as for create.
 */
async function registerWebhooks(target: Target, count: number): Promise<(() => Promise<void>) | undefined> {
  if (target.backend === 'reference' || target.backend === 'floor') return undefined;
  receiver ??= await new Promise<Server>((resolve) => {
    const server = createHttpServer((req, res) => {
      req.resume();
      req.on('end', () => {
        webhooksReceived += 1;
        res.writeHead(204).end();
      });
    });
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
  const { port } = receiver.address() as AddressInfo;
  const headers = { authorization: `Bearer ${target.key}`, 'content-type': 'application/json' };
  const ids: number[] = [];
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${target.url}/v1/webhook-endpoints`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ url: `http://127.0.0.1:${port}/bench/${i}` }),
    });
    if (res.status !== 201)
      throw new Error(`registering webhook endpoint ${i + 1}: ${res.status} ${await res.text()}`);
    ids.push(((await res.json()) as { id: number }).id);
  }
  return async () => {
    for (const id of ids)
      await fetch(`${target.url}/v1/webhook-endpoints/${id}`, { method: 'DELETE', headers });
  };
}

let receiver: Server | undefined;
/** Every webhook request the receiver has answered, so a window's deliveries are a difference. */
let webhooksReceived = 0;

/** What the Express version implements (its cursors are its own, so it has no deep pages). */
const EXPRESS_SCENARIOS: ReadonlySet<Scenario> = new Set(['list', 'list-status', 'get', 'create']);

/** The hand-written Express + better-sqlite3 version (bench/express-baseline.ts) on the same file. */
async function startExpress(database: ThrowawayDatabase, dataset: Dataset): Promise<Target> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [...TSX, 'bench/express-baseline.ts', String(port), database.url.replace(/^sqlite:/, '')],
    {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, PETSTORE_API_KEYS: KEY },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitUntilUp(url, child);
  pinTarget(child.pid as number);
  return {
    name: 'express + better-sqlite3 (by hand)',
    key: KEY,
    backend: 'express',
    size: dataset.size,
    url,
    child,
    stop: () => stop(child),
    dataset,
  };
}

function bare(database: ThrowawayDatabase, size: number): Record<string, number> {
  const spec = { url: database.url, poolSize: 10, connections, seconds, size };
  return JSON.parse(
    runToEnd(process.execPath, [...TSX, 'bench/pg-bare.ts', JSON.stringify(spec)], process.env),
  ) as Record<string, number>;
}

async function postgresReachable(): Promise<boolean> {
  try {
    await adminQuery(args['postgres-url'] as string, 'SELECT 1');
    return true;
  } catch (error) {
    log(`PostgreSQL left out: cannot reach it (${(error as Error).message}); set --postgres-url`);
    return false;
  }
}

/** dist/ as the source is now: the targets run the build. */
function build(): void {
  log('building (tsc)');
  runToEnd(
    process.execPath,
    [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
    process.env,
  );
}

/** The backends asked for (--backends), PostgreSQL left out when it cannot be reached. */
async function reachableBackends(): Promise<('sqlite' | 'postgres')[]> {
  const backends = (['sqlite', 'postgres'] as const).filter((b) => wanted.includes(b));
  if (backends.includes('postgres') && !(await postgresReachable()))
    backends.splice(backends.indexOf('postgres'), 1);
  return backends;
}

async function main(): Promise<void> {
  ensureWrk(log);
  const loadBefore = loadavg()[0] as number;
  build();
  const backends = await reachableBackends();

  const neighbour = args.neighbour ? startNeighbour(log) : undefined;
  const reference = await startScript('bench/reference-server.ts');
  const floor = await startScript('bench/fastify-floor.ts');
  const rows: Row[] = [];
  const bareQueries: Record<string, Record<string, number>> = {};
  try {
    for (const size of sizes) {
      const databases: ThrowawayDatabase[] = [];
      const targets: Target[] = [];
      try {
        const fixedBytes = { size, deepPages: ['/v1/pets?limit=20&cursor=x'] };
        for (const [baseline, name, backend] of [
          [reference, 'reference (node:http)', 'reference'],
          [floor, 'fastify floor (fixed bytes)', 'floor'],
        ] as const) {
          await waitUntilUp(baseline.url, baseline.child);
          pinTarget(baseline.child.pid as number);
          targets.push({
            name,
            key: KEY,
            backend,
            size,
            url: baseline.url,
            child: baseline.child,
            stop: async () => undefined, // stopped once, after every size
            dataset: fixedBytes,
          });
        }
        for (const backend of backends) {
          const database = await newDatabase(backend);
          databases.push(database);
          // One process per tracing mode, on the same database (seeded once), run back to back.
          const [first, ...others] = tracingModes;
          const service = await startService(backend, size, database, first);
          targets.push(service);
          for (const mode of others) targets.push(await startService(backend, size, database, mode, false));
          if (backend === 'sqlite') targets.push(await startExpress(database, service.dataset));
          if (backend === 'postgres') {
            log(`postgres: bare queries, ${size} pets`);
            bareQueries[String(size)] = bare(database, size);
          }
        }
        for (const scenario of scenarios) {
          const measured = targets.filter(
            (target) => target.backend !== 'express' || EXPRESS_SCENARIOS.has(scenario),
          );
          const windows = new Map<Target, Window[]>(measured.map((target) => [target, []]));
          for (let round = 1; round <= rounds; round++) {
            for (const target of measured) {
              // Warm-up (JIT, caches, connection pools) before a target's first window only.
              if (!quick && round === 1) await load(target, scenario, 1);
              const turn = rounds > 1 ? `, round ${round} of ${rounds}` : '';
              log(`${scenario}: ${target.name}, ${size} pets, ${seconds} s${turn}`);
              windows.get(target)?.push(await load(target, scenario, seconds));
            }
          }
          for (const target of measured) {
            const result = combineWindows(windows.get(target) ?? []);
            const requests = Math.max(1, result.requests);
            rows.push({
              scenario,
              target: target.name,
              backend: target.backend,
              size,
              requestsPerSecond: result.requestsPerSecond,
              p50: result.p50,
              p99: result.p99,
              non2xx: result.non2xx,
              peakRssMiB: result.peakRss / 2 ** 20,
              cpuMicrosPerRequest: result.cpuMicros / requests,
              generatorCpuMicrosPerRequest: result.generatorCpuMicros / requests,
              generatorBusy: result.generatorCpuMicros / result.wallMicros,
              ...(result.delivered === undefined
                ? {}
                : { deliveriesPerRequest: result.delivered / requests }),
            });
          }
        }
      } finally {
        for (const target of targets) await target.stop();
        for (const database of databases) await database.drop();
      }
    }
  } finally {
    await stop(reference.child);
    await stop(floor.child);
    receiver?.close();
    sink?.close();
    if (neighbour) await stop(neighbour);
  }

  const machine = {
    nproc: availableParallelism(),
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    cpu: cpus()[0]?.model ?? 'unknown',
    node: process.version,
  };
  const given = process.argv.slice(2);
  const command = `npm run bench${given.length > 0 ? ` -- ${given.join(' ')}` : ''}`;
  const run = {
    date: new Date().toISOString(),
    command,
    machine,
    workers,
    connections,
    seconds,
    ...(rounds > 1 ? { rounds } : {}),
    generator: `wrk, 1 thread${pin ? `, pinned to CPU ${GENERATOR_CPU} (targets on ${TARGET_CPUS})` : ''}`,
    loadAverage: [loadBefore, loadavg()[0] as number] as [number, number],
    ...(neighbour
      ? { neighbour: `a CPU-bound process (a busy loop) pinned to CPU ${GENERATOR_CPU}, the whole run` }
      : {}),
    rows,
    bareQueries,
  };
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  const file = join(ROOT, `bench/results/${run.date.replaceAll(':', '-')}.json`);
  writeFileSync(file, `${JSON.stringify(run, null, 2)}\n`);
  const report = renderReport(run);
  process.stdout.write(report);
  // A full run replaces the table the analysis refers to; any narrower one (--quick, some scenarios
  // or sizes) lands in a section of its own below it, so a smoke run never overwrites the full figures.
  const complete = !quick && scenarios.length === SCENARIOS.length && sizes.length > 1;
  writeTable(report, complete ? FULL : PARTIAL);
  log(
    `results: ${file}, docs/benchmarks-runs.md (${complete ? 'the full table' : 'the latest partial run'})`,
  );
}

/** The runs' tables have a page of their own (docs/benchmarks-runs.md): benchmarks.md stays a page to read. */
const FULL = {
  start: '<!-- bench:start (written by npm run bench) -->',
  end: '<!-- bench:end -->',
  page: 'docs/benchmarks-runs.md',
};
const PARTIAL = {
  start: '<!-- bench:partial:start (written by npm run bench -- --quick, or any narrower run) -->',
  end: '<!-- bench:partial:end -->',
  page: 'docs/benchmarks-runs.md',
};

/** Replaces one generated part of its page (docs/benchmarks.md by default), keeping what is written around it. */
function writeTable(report: string, section: { start: string; end: string; page?: string }): void {
  const path = join(ROOT, section.page ?? 'docs/benchmarks.md');
  let doc: string;
  try {
    doc = readFileSync(path, 'utf8');
  } catch {
    doc = '# Benchmarks\n';
  }
  if (!doc.includes(section.start)) {
    const heading = section === PARTIAL ? '\n## The latest partial run\n\n' : '\n';
    doc = `${doc.trimEnd()}\n${heading}${section.start}\n${section.end}\n`;
  }
  const [before, rest] = doc.split(section.start);
  const after = rest?.split(section.end)[1] ?? '\n';
  writeFileSync(path, `${before}${section.start}\n${report}${section.end}${after}`);
}

const HEADLINE = {
  start: '<!-- bench:headline:start (written by npm run bench -- --headline <quiet run> <neighbour run>) -->',
  end: '<!-- bench:headline:end -->',
};

const DELIVERY_LAG = {
  start: '<!-- bench:delivery-lag:start (written by npm run bench -- --scenarios delivery-lag) -->',
  end: '<!-- bench:delivery-lag:end -->',
};

if (args.render) {
  const run = JSON.parse(readFileSync(args.render as string, 'utf8')) as Run;
  const report = renderReport(run);
  process.stdout.write(report);
  // The section its own run would have written: the full table only for every scenario at two sizes.
  const ran = (key: 'scenario' | 'size') => new Set(run.rows.map((row) => row[key])).size;
  writeTable(report, ran('scenario') === SCENARIOS.length && ran('size') > 1 ? FULL : PARTIAL);
} else if (args.headline) {
  // Two saved runs, one on a quiet machine and one with --neighbour: the figure of record.
  const [quiet, busy] = [args.headline as string, ...positionals].map(
    (file) => JSON.parse(readFileSync(file, 'utf8')) as Run,
  );
  if (!quiet || !busy || quiet.neighbour || !busy.neighbour)
    throw new Error('--headline <a quiet run> <a run with --neighbour>: two files of bench/results/');
  const report = renderHeadline(quiet, busy);
  process.stdout.write(report);
  writeTable(report, HEADLINE);
} else {
  if (scenarios.length > 0) await main();
  if ((args.scenarios as string).split(',').includes('delivery-lag')) await deliveryLag();
}

/** The delivery-lag scenario (bench/delivery-lag.ts), for each backend and layout, on a fresh database each. */
async function deliveryLag(): Promise<void> {
  ensureWrk(log);
  // Another build (--cli) is measured as it is.
  if (!args.cli) build();
  const backends = await reachableBackends();
  const results: DeliveryLagResult[] = [];
  for (const backend of backends) {
    for (const layout of (args.layouts as string).split(',') as Layout[]) {
      const database = await newDatabase(backend);
      try {
        results.push(
          await measureDeliveryLag({
            backend,
            layout,
            databaseUrl: database.url,
            env: serviceEnv(database.url),
            key: KEY,
            seconds,
            connections,
            pin,
            generatorCpu: GENERATOR_CPU,
            ...(args.cli ? { cli: args.cli as string } : {}),
            ...(args['paced-rate'] ? { pacedRate: Number(args['paced-rate']) } : {}),
            log,
          }),
        );
      } finally {
        await database.drop();
      }
    }
  }
  const given = process.argv.slice(2);
  const command = `npm run bench${given.length > 0 ? ` -- ${given.join(' ')}` : ''}`;
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  const date = new Date().toISOString();
  const file = join(ROOT, `bench/results/delivery-lag-${date.replaceAll(':', '-')}.json`);
  writeFileSync(file, `${JSON.stringify({ date, command, node: process.version, results }, null, 2)}\n`);
  const report = `Run ${date} on Node.js ${process.version}: \`${command}\`\n\n${renderDeliveryLag(results)}\n`;
  process.stdout.write(report);
  writeTable(report, DELIVERY_LAG);
  log(`results: ${file}, docs/benchmarks.md (delivery lag)`);
}
