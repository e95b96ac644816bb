/**
 * Where the service's CPU per request goes: `npm run bench -- profile [--seconds 5] [--connections 32]
 * [--size 10000] [--scenarios get,list,create] [--neighbour]`. For each scenario, the real `petstore
 * serve` on SQLite (seeded through the bulk path) and the Fastify floor (bench/fastify-floor.ts, the
 * same fixed bytes) are loaded with wrk (bench/load.ts) for a 1 s warm-up then measured windows of
 * --seconds each, per request:
 *
 * - CPU by thread: /proc/<pid>/task/* before and after a window; threads are named by a preload
 *   (bench/name-threads.mjs), as Node 20 names none;
 * - GCs and bytes allocated, from --trace-gc in the same window (one line per GC: its cost is noise);
 * - syscalls, in a window of their own with `strace -c -f` attached (it slows the process a lot);
 * - async resources created (PROMISE, TickObject, …), in a second process of each target with an
 *   async_hooks counter preloaded (bench/count-async.mjs), as the hook itself costs CPU;
 * - and the Fastify hooks that run for getPet, listPets and createPet (printRoutes of the app built as
 *   `serve` builds it).
 *
 * `--neighbour` keeps the last CPU busy, as bench/run.ts's does. Prints Markdown; the raw figures go to
 * bench/results/profile-<date>.json (not committed).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config/config.js';
import { openStorage } from '../src/storage/open-storage.js';
import { poll, startServe } from '../support/service-process.js';
import { ensureWrk, type LoadResult, runLoad } from './load.js';
import {
  CLOCK_TICKS,
  definedOnly,
  freePort,
  LAST_CPU,
  ROOT,
  seedDatabase,
  serviceEnv,
  sqliteDatabase,
  startNeighbour,
  startScript,
  stop,
  waitUntilUp,
} from './processes.js';
import {
  cpuByGroup,
  type GcSummary,
  parseGcTrace,
  parseRouteHooks,
  parseStraceSummary,
  type RouteHooks,
  summariseGcs,
  type ThreadSample,
  threadSample,
} from './profile-parse.js';
import { type Dataset, type LoadSpec, type Scenario, trafficFor } from './scenarios.js';

const KEY = `bench-${randomBytes(16).toString('hex')}`;
const NAME_THREADS = join(ROOT, 'bench/name-threads.mjs');
const COUNT_ASYNC = join(ROOT, 'bench/count-async.mjs');

/** The scenarios profiled, and the route each one exercises. */
const ROUTES = {
  get: { operation: 'getPet', route: 'GET /v1/pets/:petId' },
  list: { operation: 'listPets', route: 'GET /v1/pets' },
  create: { operation: 'createPet', route: 'POST /v1/pets' },
} as const satisfies Partial<Record<Scenario, unknown>>;
type Profiled = keyof typeof ROUTES;

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '32' },
    size: { type: 'string', default: '10000' },
    scenarios: { type: 'string', default: Object.keys(ROUTES).join(',') },
    neighbour: { type: 'boolean', default: false },
  },
});
const seconds = Number(args.seconds);
const connections = Number(args.connections);
const size = Number(args.size);
const scenarios = (args.scenarios as string).split(',').map((name) => {
  if (!(name in ROUTES))
    throw new Error(`--scenarios: ${name} is not one of ${Object.keys(ROUTES).join(', ')}`);
  return name as Profiled;
});

function log(message: string): void {
  process.stderr.write(`profile: ${message}\n`);
}

/** A process whose CPU, GCs and syscalls are measured, and its twin that counts async resources. */
interface Target {
  name: 'service' | 'floor';
  url: string;
  pid: number;
  /** Its stdout since the last `clearOutput` (JSON log lines and --trace-gc lines). */
  output(): string;
  clearOutput(): void;
  counting: { url: string; pid: number; file: string };
  stop(): Promise<unknown>;
}

interface Measures {
  cpu: { load: LoadSummary; microsByGroup: Record<string, number> };
  gc: { load: LoadSummary; unparsedLines: number } & GcSummary;
  syscalls: { load: LoadSummary; calls: Record<string, { calls: number; errors: number }> };
  asyncResources: { load: LoadSummary; created: Record<string, number> };
}

type LoadSummary = Pick<LoadResult, 'requests' | 'requestsPerSecond' | 'non2xx'>;
const summary = ({ requests, requestsPerSecond, non2xx }: LoadResult): LoadSummary => ({
  requests,
  requestsPerSecond,
  non2xx,
});

/** Every thread of a process, from /proc; a thread that ends while it is read is left out. */
function threads(pid: number): ThreadSample[] {
  const samples: ThreadSample[] = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const sample = threadSample(
        Number(tid),
        readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'),
        readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8'),
      );
      if (sample) samples.push(sample);
    } catch {
      // ended meanwhile
    }
  }
  return samples;
}

/** The async resources a counting process has created so far, by type (bench/count-async.mjs). */
async function asyncCounts(pid: number, file: string): Promise<Record<string, number>> {
  rmSync(file, { force: true });
  process.kill(pid, 'SIGUSR2');
  await poll('the async resource counts', () => (existsSync(file) ? true : undefined));
  return JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>;
}

/** Syscalls made during one load, counted by `strace -c -f` attached to every thread of the process. */
async function straced(pid: number, spec: LoadSpec, dir: string) {
  const file = join(dir, `strace-${pid}.txt`);
  const strace = spawn('strace', ['-c', '-f', '-o', file, '-p', String(pid)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let said = '';
  strace.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    said += chunk;
  });
  const closed = new Promise<number | null>((resolve) => strace.once('close', resolve));
  try {
    await poll('strace to attach', () => {
      if (strace.exitCode !== null) throw new Error(`strace exited (${strace.exitCode}): ${said}`);
      return said.includes('attached') ? true : undefined;
    });
    const result = await runLoad(spec);
    // SIGINT: strace detaches and writes its table.
    strace.kill('SIGINT');
    await closed;
    return { load: summary(result), calls: parseStraceSummary(readFileSync(file, 'utf8')) };
  } finally {
    if (strace.exitCode === null) strace.kill('SIGKILL');
  }
}

async function measure(target: Target, scenario: Profiled, dataset: Dataset, dir: string): Promise<Measures> {
  const spec = (url: string, duration: number): LoadSpec => ({
    url,
    key: KEY,
    connections,
    seconds: duration,
    mix: trafficFor(scenario, dataset),
  });
  log(`${scenario}: ${target.name}, warm-up then CPU, GCs (${seconds} s)`);
  target.clearOutput();
  await runLoad(spec(target.url, 1)); // JIT, caches
  const from = target.output().length;
  const before = threads(target.pid);
  const result = await runLoad(spec(target.url, seconds));
  const after = threads(target.pid);
  const trace = parseGcTrace(target.output());
  const earlier = parseGcTrace(target.output().slice(0, from)).events.length;
  const load = summary(result);
  const gc = {
    load,
    unparsedLines: trace.unparsed,
    ...summariseGcs(trace.events[earlier - 1], trace.events.slice(earlier)),
  };
  const cpu = { load, microsByGroup: cpuByGroup(target.pid, before, after) };

  log(`${scenario}: ${target.name}, syscalls (strace, ${seconds} s)`);
  const syscalls = await straced(target.pid, spec(target.url, seconds), dir);

  log(`${scenario}: ${target.name}, async resources (a counting process, ${seconds} s)`);
  const { counting } = target;
  await runLoad(spec(counting.url, 1));
  const start = await asyncCounts(counting.pid, counting.file);
  const counted = await runLoad(spec(counting.url, seconds));
  const end = await asyncCounts(counting.pid, counting.file);
  const created = Object.fromEntries(
    Object.entries(end).map(([type, count]) => [type, count - (start[type] ?? 0)]),
  );
  return { cpu, gc, syscalls, asyncResources: { load: summary(counted), created } };
}

/** The service: one process measured (--trace-gc, threads named) and one counting async resources. */
async function startService(databaseUrl: string, dir: string): Promise<Target> {
  const port = await freePort();
  const service = await startServe(definedOnly(serviceEnv(KEY, databaseUrl, { PORT: String(port) })), {
    entry: 'built',
    stdout: 'keep',
    nodeArgs: ['--trace-gc', '--import', NAME_THREADS],
  });
  const file = join(dir, 'async-service.json');
  const countingPort = await freePort();
  const counting = await startServe(
    definedOnly(serviceEnv(KEY, databaseUrl, { PORT: String(countingPort), COUNT_ASYNC_FILE: file })),
    { entry: 'built', stdout: 'ignore', nodeArgs: ['--import', COUNT_ASYNC] },
  );
  return {
    name: 'service',
    url: service.url,
    pid: service.child.pid as number,
    output: () => service.stdout,
    clearOutput: () => {
      service.stdout = '';
    },
    counting: { url: counting.url, pid: counting.child.pid as number, file },
    stop: () => Promise.all([service.stop(), counting.stop()]),
  };
}

/** The Fastify floor, as the service: one process measured, one counting. */
async function startFloor(dir: string): Promise<Target> {
  const floor = await startScript('bench/fastify-floor.ts', {
    nodeArgs: ['--trace-gc', '--import', NAME_THREADS],
    stdout: 'pipe',
  });
  let output = '';
  floor.child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  const file = join(dir, 'async-floor.json');
  const counting = await startScript('bench/fastify-floor.ts', {
    nodeArgs: ['--import', COUNT_ASYNC],
    env: { ...process.env, COUNT_ASYNC_FILE: file },
  });
  for (const { url, child } of [floor, counting]) await waitUntilUp(url, child, KEY);
  return {
    name: 'floor',
    url: floor.url,
    pid: floor.child.pid as number,
    output: () => output,
    clearOutput: () => {
      output = '';
    },
    counting: { url: counting.url, pid: counting.child.pid as number, file },
    stop: () => Promise.all([stop(floor.child), stop(counting.child)]),
  };
}

/** The hooks of every route of the app, built as `serve` builds it (but with no logger, no deliveries). */
async function routeHooks(databaseUrl: string): Promise<Record<string, RouteHooks>> {
  const config = loadConfig(definedOnly(serviceEnv(KEY, databaseUrl)));
  const storage = await openStorage(config);
  try {
    const app = await buildApp({ config, storage, role: 'api', logger: false });
    try {
      return parseRouteHooks(app.printRoutes({ includeHooks: true, commonPrefix: false }));
    } finally {
      await app.close();
    }
  } finally {
    await storage.close();
  }
}

type Results = Record<Profiled, Record<Target['name'], Measures>>;

async function main(): Promise<void> {
  ensureWrk(log);
  const loadBefore = loadavg()[0] as number;
  const dir = mkdtempSync(join(tmpdir(), 'petstore-profile-'));
  const database = sqliteDatabase();
  const neighbour = args.neighbour ? startNeighbour(log) : undefined;
  const started: Target[] = [];
  try {
    log(`sqlite: seeding ${size} pets through the bulk path (petstore seed)`);
    seedDatabase(serviceEnv(KEY, database.url), size);
    const hooks = await routeHooks(database.url);
    const floor = await startFloor(dir);
    started.push(floor);
    const service = await startService(database.url, dir);
    started.push(service);
    const dataset: Dataset = { size, deepPages: [] };
    const results = {} as Results;
    for (const scenario of scenarios) {
      results[scenario] = {
        floor: await measure(floor, scenario, dataset, dir),
        service: await measure(service, scenario, dataset, dir),
      };
    }
    const given = process.argv.slice(2);
    const run = {
      date: new Date().toISOString(),
      command: `npm run bench -- profile${given.length > 0 ? ` ${given.join(' ')}` : ''}`,
      machine: {
        nproc: availableParallelism(),
        memoryGiB: Math.round(totalmem() / 2 ** 30),
        cpu: cpus()[0]?.model ?? 'unknown',
        node: process.version,
      },
      seconds,
      connections,
      size,
      loadAverage: [loadBefore, loadavg()[0] as number] as [number, number],
      ...(neighbour ? { neighbour: `a busy loop pinned to CPU ${LAST_CPU}, the whole run` } : {}),
      hooks: Object.fromEntries(
        Object.values(ROUTES).map(({ operation, route }) => [
          operation,
          { route, phases: hooks[route] ?? {} },
        ]),
      ),
      results,
    };
    mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
    const file = join(ROOT, `bench/results/profile-${run.date.replaceAll(':', '-')}.json`);
    writeFileSync(file, `${JSON.stringify(run, null, 2)}\n`);
    process.stdout.write(render(run));
    log(`results: ${file}`);
  } finally {
    for (const target of started) await target.stop();
    if (neighbour) await stop(neighbour);
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

// The report.

const perRequest = (value: number, load: LoadSummary) => value / Math.max(1, load.requests);
const number = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : '—');
const multiple = (service: number, floor: number) => (floor > 0 ? `${(service / floor).toFixed(2)}×` : '—');
const row = (cells: (string | number)[]) => `| ${cells.join(' | ')} |`;

function table(header: string[], rows: (string | number)[][]): string[] {
  return [row(header), row(header.map(() => '---')), ...rows.map(row)];
}

/**
 * Service against floor, one row per key, for one scenario: the keys either has, those in `order`
 * first, the total and any share (a key ending in "(%)", which has no multiple) last.
 */
function compared(
  scenario: string,
  service: Record<string, number>,
  floor: Record<string, number>,
  digits: number,
  order: string[] = [],
): (string | number)[][] {
  const share = (key: string) => key.endsWith('(%)');
  const last = (key: string) => key === 'total' || share(key);
  const keys = [...new Set([...order, ...Object.keys(service), ...Object.keys(floor)])].filter(
    (key) => key in service || key in floor,
  );
  return [...keys.filter((key) => !last(key)), ...keys.filter(last)].map((key) => [
    scenario,
    key,
    number(service[key] ?? 0, digits),
    number(floor[key] ?? 0, digits),
    share(key) ? '' : multiple(service[key] ?? 0, floor[key] ?? 0),
  ]);
}

function render(run: {
  date: string;
  command: string;
  machine: { nproc: number; memoryGiB: number; cpu: string; node: string };
  seconds: number;
  connections: number;
  size: number;
  loadAverage: [number, number];
  neighbour?: string;
  hooks: Record<string, { route: string; phases: RouteHooks }>;
  results: Results;
}): string {
  const { results } = run;
  const entries = Object.entries(results) as [Profiled, Record<Target['name'], Measures>][];
  const lines = [
    `## Profile: where the CPU per request goes${run.neighbour ? ' (with a neighbour)' : ''}`,
    '',
    `Date: ${run.date}. Command: \`${run.command}\`. Machine: ${run.machine.nproc} cores (${run.machine.cpu}), ` +
      `${run.machine.memoryGiB} GiB, Node.js ${run.machine.node}. SQLite, ${run.size} pets seeded; wrk, 1 thread, ` +
      `${run.connections} connections, 1 s warm-up then ${run.seconds} s per measured window. ` +
      `Load average ${run.loadAverage.map((value) => value.toFixed(2)).join(' → ')}.` +
      (run.neighbour ? ` Neighbour: ${run.neighbour}.` : ''),
    '',
    '### The windows',
    '',
    ...table(
      ['scenario', 'target', 'window', 'requests', 'req/s', 'non-2xx'],
      entries.flatMap(([scenario, byTarget]) =>
        (['service', 'floor'] as const).flatMap((name) => {
          const { cpu, syscalls, asyncResources } = byTarget[name];
          return (
            [
              ['CPU, GCs', cpu.load],
              ['strace', syscalls.load],
              ['async hooks', asyncResources.load],
            ] as const
          ).map(([window, load]) => [
            scenario,
            name,
            window,
            load.requests,
            number(load.requestsPerSecond, 0),
            load.non2xx,
          ]);
        }),
      ),
    ),
    '',
    '### CPU by thread (µs per request)',
    '',
    "main: the event loop; v8-platform: V8's workers (concurrent GC, compilation), its delayed-task " +
      "scheduler and the inspector's signal thread; libuv-pool: the threadpool (fs, dns, crypto, zlib); " +
      "node: threads started after the preload named the others (in the floor, tsx's module loader). " +
      `/proc counts in clock ticks (${1000 / CLOCK_TICKS} ms): small figures are coarse.`,
    '',
    ...table(
      ['scenario', 'thread', 'service', 'floor', 'service ÷ floor'],
      entries.flatMap(([scenario, { service, floor }]) => {
        const per = (measures: Measures) => {
          const groups = Object.fromEntries(
            Object.entries(measures.cpu.microsByGroup).map(([group, micros]) => [
              group,
              perRequest(micros, measures.cpu.load),
            ]),
          );
          const total = Object.values(groups).reduce((sum, value) => sum + value, 0);
          return {
            ...groups,
            total,
            'not on main (%)': total > 0 ? (100 * (total - (groups.main ?? 0))) / total : 0,
          };
        };
        return compared(scenario, per(service), per(floor), 1, [
          'main',
          'v8-platform',
          'libuv-pool',
          'node',
          'total',
        ]);
      }),
    ),
    '',
    '### GCs and allocation',
    '',
    'From --trace-gc in the CPU window. Allocated: the sum over its GCs of the used heap before each ' +
      'minus the used heap after the one before (bench/profile-parse.ts), per request.',
    '',
    ...table(
      ['scenario', 'measure', 'service', 'floor', 'service ÷ floor'],
      entries.flatMap(([scenario, { service, floor }]) => {
        const per = ({ gc }: Measures) => ({
          'scavenges / 1,000 req': perRequest(gc.scavenges * 1000, gc.load),
          'mark-compacts / 1,000 req': perRequest(gc.markCompacts * 1000, gc.load),
          ...(gc.minorMarkCompacts > 0
            ? { 'minor mark-compacts / 1,000 req': perRequest(gc.minorMarkCompacts * 1000, gc.load) }
            : {}),
          'GC pause, ms / 1,000 req': perRequest(gc.pauseMs * 1000, gc.load),
          'KiB allocated / req': perRequest(gc.allocatedBytes / 1024, gc.load),
        });
        return compared(scenario, per(service), per(floor), 2);
      }),
    ),
    '',
    '### Async resources created per request',
    '',
    'async_hooks init, by type, in a second process of each target (bench/count-async.mjs).',
    '',
    ...table(
      ['scenario', 'type', 'service', 'floor', 'service ÷ floor'],
      entries.flatMap(([scenario, { service, floor }]) => {
        const per = ({ asyncResources }: Measures): Record<string, number> => {
          const counts = Object.fromEntries(
            Object.entries(asyncResources.created)
              .filter(([, count]) => count > 0)
              .map(([type, count]) => [type, perRequest(count, asyncResources.load)]),
          );
          return { ...counts, total: Object.values(counts).reduce((sum, value) => sum + value, 0) };
        };
        const ours = per(service);
        const theirs = per(floor);
        // The types that matter: at least 0.01 per request in either.
        const shown = (counts: Record<string, number>) =>
          Object.fromEntries(Object.entries(counts).filter(([, value]) => value >= 0.01));
        const order = Object.keys(ours).sort((a, b) => (ours[b] ?? 0) - (ours[a] ?? 0));
        return compared(scenario, shown(ours), shown(theirs), 2, ['PROMISE', 'TickObject', ...order]);
      }),
    ),
    '',
    '### Syscalls per request',
    '',
    '`strace -c -f` attached to every thread for a window of its own; syscalls under 0.01 per request in both are left out.',
    '',
    ...table(
      ['scenario', 'syscall', 'service', 'floor', 'service ÷ floor'],
      entries.flatMap(([scenario, { service, floor }]) => {
        const per = ({ syscalls }: Measures): Record<string, number> => {
          const calls = Object.fromEntries(
            Object.entries(syscalls.calls).map(([name, { calls }]) => [
              name,
              perRequest(calls, syscalls.load),
            ]),
          );
          return { ...calls, total: Object.values(calls).reduce((sum, value) => sum + value, 0) };
        };
        const ours = per(service);
        const theirs = per(floor);
        const shown = (counts: Record<string, number>) =>
          Object.fromEntries(
            Object.entries(counts).filter(
              ([name]) => (ours[name] ?? 0) >= 0.01 || (theirs[name] ?? 0) >= 0.01,
            ),
          );
        const order = Object.keys(ours).sort((a, b) => (ours[b] ?? 0) - (ours[a] ?? 0));
        return compared(scenario, shown(ours), shown(theirs), 2, order);
      }),
    ),
    '',
    '### Hooks per route',
    '',
    'From `printRoutes({ includeHooks: true })` of the app built as `serve` builds it; the floor registers ' +
      'none. anonymous(): an arrow function or one without a name.',
    '',
    ...table(
      ['operation', 'route', 'phase', 'hooks', 'names (in order)'],
      Object.entries(run.hooks).flatMap(([operation, { route, phases }]) => {
        const listed = Object.entries(phases);
        if (listed.length === 0) return [[operation, route, '—', 0, 'not found in printRoutes']];
        return [
          ...listed.map(([phase, names]) => [operation, route, phase, names.length, names.join(', ')]),
          [operation, route, 'all', listed.reduce((sum, [, names]) => sum + names.length, 0), ''],
        ];
      }),
    ),
    '',
  ];
  return `${lines.join('\n')}\n`;
}

await main();
