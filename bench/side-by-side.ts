/**
 * Builds, or settings, measured at the same moment: `npm run bench -- side-by-side [--scenario get]
 * [--rounds 7] [--seconds 3] [--apart] [--backend sqlite|postgres|sqlite,postgres] [--postgres-url URL]
 * [--pin-postgres] [--cpu-prof [--cpu-prof-rows 30] [--cpu-prof-interval 1000]] NAME=<cli>[@VAR=value,VAR=value] …`, e.g.
 * `SHIPPED=dist/cli/main.js NO_LINES=dist/cli/main.js@LOG_REQUESTS=false OLD=/tmp/old/dist/cli/main.js`.
 *
 * Each NAME is a `petstore serve` of that CLI (a build of this repository, or a copy of one with a part
 * taken away) with those variables, on a database of its own (SQLite, or with --backend postgres a
 * PostgreSQL database of its own on one server) seeded with 10,000 pets alike, pinned to
 * CPU 0 with the Fastify floor (bench/fastify-floor.ts). In every round all of them are loaded at once,
 * each by its own wrk (32 connections, pinned to the last CPU): on a shared machine whose speed changes
 * from one second to the next (the floor's CPU per request moved from 32 to 68 µs within an hour,
 * 2026-11-29), targets measured one after the other compare different machines, while targets measured
 * together share every change. `--apart` measures them one after the other instead, as bench/run.ts does.
 * Each round prints every target's CPU per request; the end, each one's median over the rounds and the
 * median of its multiples of the floor in the same round. The load is lighter than bench/run.ts's (wrk
 * shares its CPU among the targets), so a multiple here is not the figure of record's: compare the
 * targets of one run with one another.
 *
 * `--backend sqlite,postgres` runs each NAME on both (`NAME/sqlite`, `NAME/postgres`), so one build's two
 * backends are measured together. `--pin-postgres` moves the PostgreSQL backends serving each target to
 * the last CPU after the warm-up second, so CPU 0 runs nothing but the node processes. `--cpu-prof`
 * profiles every target (the floor too) with V8's sampler and prints, from the measured rounds only,
 * self time per request by area (a package, `node:internal`, a folder of `dist/`) and by function
 * (bench/self-time.ts); with `--apart` each target runs alone on its CPU while it is measured, which a
 * sampled profile needs to be read as CPU. The profiler costs CPU itself (a `get` about a third more at
 * 1,000 µs between samples): compare profiles with profiles, CPU figures with runs without it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { ensureWrk, runLoad } from './load.js';
import {
  BENCH_POSTGRES_URL,
  benchDatabase,
  cpuMicros,
  freePort,
  LAST_CPU,
  pinProcess,
  seedDatabase,
  serviceEnv,
  startScript,
  stop,
  waitUntilUp,
} from './processes.js';
import { median } from './rounds.js';
import { SCENARIOS, type Scenario, trafficFor } from './scenarios.js';
import { area, grouped, monotonicMicros, selfTime, selfTimeTable, type Window } from './self-time.js';

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    scenario: { type: 'string', default: 'get' },
    rounds: { type: 'string', default: '7' },
    seconds: { type: 'string', default: '3' },
    apart: { type: 'boolean', default: false },
    backend: { type: 'string', default: 'sqlite' },
    'postgres-url': { type: 'string', default: BENCH_POSTGRES_URL },
    'pin-postgres': { type: 'boolean', default: false },
    'cpu-prof': { type: 'boolean', default: false },
    'cpu-prof-rows': { type: 'string', default: '30' },
    'cpu-prof-interval': { type: 'string', default: '1000' },
  },
});
const backends = args.backend.split(',');
const scenario = args.scenario as Scenario;
if (!SCENARIOS.includes(scenario)) throw new Error(`--scenario: one of ${SCENARIOS.join(', ')}`);
const KEY = `bench-side-by-side-${process.pid}-0123456789abcdef`;
const SIZE = 10_000;
const SERVICE_CPU = '0';

interface Target {
  name: string;
  url: string;
  child: ChildProcess;
  cpuPerRequest: number[];
  /** Its PostgreSQL database's name, if on PostgreSQL (for --pin-postgres). */
  database?: string;
  /** --cpu-prof: where its profile is written, and the measured windows and their requests. */
  profile?: { directory: string; windows: Window[]; requests: number };
}

/** Node's options for a target's process: with --cpu-prof, a profile into a directory of its own. */
function profiled(): { nodeArgs: string[]; profile?: Target['profile'] } {
  if (!args['cpu-prof']) return { nodeArgs: [] };
  const directory = mkdtempSync(join(tmpdir(), 'petstore-cpu-prof-'));
  // --cpu-prof-interval: µs between samples (V8's default, 1,000, unless told).
  const nodeArgs = [
    '--cpu-prof',
    '--cpu-prof-dir',
    directory,
    '--cpu-prof-interval',
    args['cpu-prof-interval'],
  ];
  return { nodeArgs, profile: { directory, windows: [], requests: 0 } };
}

/** --pin-postgres: the backends connected to each target's database, to the last CPU. */
async function pinPostgres(targets: readonly Target[]): Promise<void> {
  const client = new pg.Client({ connectionString: args['postgres-url'] });
  await client.connect();
  try {
    for (const { database } of targets) {
      if (!database) continue;
      const { rows } = await client.query<{ pid: number }>(
        'SELECT pid FROM pg_stat_activity WHERE datname = $1',
        [database],
      );
      for (const { pid } of rows) pinProcess(pid, LAST_CPU);
    }
  } finally {
    await client.end();
  }
}

/** `NAME=<cli>@VAR=value,VAR=value`: the name, the CLI and the variables. */
function parseTarget(spec: string): { name: string; cli: string; env: Record<string, string> } {
  const equals = spec.indexOf('=');
  if (equals < 1) throw new Error(`${spec}: expected NAME=<cli>[@VAR=value,…]`);
  const [cli, variables = ''] = spec.slice(equals + 1).split(/@(.*)/s) as [string, string?];
  const env = Object.fromEntries(
    variables
      .split(',')
      .filter(Boolean)
      .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );
  return { name: spec.slice(0, equals), cli, env };
}

const pin = (pid: number) => pinProcess(pid, SERVICE_CPU);

async function main(): Promise<void> {
  if (positionals.length === 0) throw new Error('name at least one target: NAME=<cli>[@VAR=value,…]');
  ensureWrk(console.error);
  const targets: Target[] = [];
  const databases: { drop(): Promise<void> }[] = [];
  try {
    const floorProfile = profiled();
    const floor = await startScript('bench/fastify-floor.ts', { nodeArgs: floorProfile.nodeArgs });
    await waitUntilUp(floor.url, floor.child, KEY);
    pin(floor.child.pid as number);
    targets.push({
      name: 'floor',
      url: floor.url,
      child: floor.child,
      cpuPerRequest: [],
      ...(floorProfile.profile ? { profile: floorProfile.profile } : {}),
    });
    for (const spec of positionals) {
      for (const backend of backends) {
        const { name: given, cli, env: variables } = parseTarget(spec);
        const name = backends.length > 1 ? `${given}/${backend}` : given;
        const database = await benchDatabase(
          backend,
          args['postgres-url'],
          `petstore_side_${name.toLowerCase().replace(/[^a-z0-9]/g, '_')}`,
        );
        databases.push(database);
        const port = await freePort();
        const env = serviceEnv(KEY, database.url, { PORT: String(port), ...variables });
        seedDatabase(env, SIZE, cli);
        const { nodeArgs, profile } = profiled();
        const child = spawn(process.execPath, [...nodeArgs, cli, 'serve'], {
          env,
          stdio: ['ignore', 'ignore', 'inherit'],
        });
        const url = `http://127.0.0.1:${port}`;
        const onPostgres = backend === 'postgres' ? new URL(database.url).pathname.slice(1) : undefined;
        targets.push({
          name,
          url,
          child,
          cpuPerRequest: [],
          ...(onPostgres ? { database: onPostgres } : {}),
          ...(profile ? { profile } : {}),
        });
        await waitUntilUp(url, child, KEY);
        pin(child.pid as number);
      }
    }
    const mix = trafficFor(scenario, { size: SIZE, deepPages: [] });
    const measure = async (target: Target, seconds: number) => {
      const pid = target.child.pid as number;
      const before = cpuMicros(pid);
      const from = monotonicMicros();
      const load = await runLoad({ url: target.url, key: KEY, connections: 32, seconds, mix }, LAST_CPU);
      if (load.non2xx > 0) throw new Error(`${target.name}: ${load.non2xx} answers not 2xx`);
      return {
        cpu: (cpuMicros(pid) - before) / load.requests,
        load,
        window: { fromMicros: from, toMicros: monotonicMicros() },
      };
    };
    // A first second each, not counted: the JIT's first compilations (and the pools' connections opened).
    await Promise.all(targets.map((target) => measure(target, 1)));
    if (args['pin-postgres']) await pinPostgres(targets);
    for (let round = 1; round <= Number(args.rounds); round++) {
      const cells: string[] = [];
      const one = async (target: Target) => {
        const { cpu, load, window } = await measure(target, Number(args.seconds));
        target.cpuPerRequest.push(cpu);
        target.profile?.windows.push(window);
        if (target.profile) target.profile.requests += load.requests;
        cells.push(
          `${target.name} ${cpu.toFixed(1)} µs (${Math.round(load.requestsPerSecond)}/s, wrk ${(load.generatorCpuMicros / load.requests).toFixed(1)} µs)`,
        );
      };
      if (args.apart) for (const target of targets) await one(target);
      else await Promise.all(targets.map(one));
      console.log(`round ${round}: ${cells.join(' | ')}`);
    }
    const floorCpu = (targets[0] as Target).cpuPerRequest;
    console.log(
      `\n${scenario} on ${args.backend}, ${args.apart ? 'one after the other' : 'together'}, ${args.rounds} rounds of ${args.seconds} s:`,
    );
    for (const target of targets) {
      const multiples = target.cpuPerRequest.map((cpu, round) => cpu / (floorCpu[round] as number));
      console.log(
        `${target.name}: ${median(target.cpuPerRequest).toFixed(1)} µs a request, ${median(multiples).toFixed(2)} × floor (rounds: ${multiples.map((m) => m.toFixed(2)).join(' ')})`,
      );
    }
    if (args['cpu-prof']) {
      // A profile is written as its process exits.
      for (const target of targets) await stop(target.child);
      printProfiles(targets);
    }
  } finally {
    for (const target of targets) await stop(target.child);
    for (const database of databases) await database.drop();
    for (const { profile } of targets)
      if (profile) rmSync(profile.directory, { recursive: true, force: true });
  }
}

function printProfiles(targets: readonly Target[]): void {
  const columns = targets.flatMap(({ name, profile }) =>
    profile
      ? [{ name, times: selfTime(profile.directory, profile.windows), requests: profile.requests }]
      : [],
  );
  console.log('\nSelf time by area, µs a request (V8 sampling, the measured rounds only):\n');
  console.log(
    selfTimeTable(
      columns.map((column) => ({ ...column, times: grouped(column.times, area) })),
      Number.POSITIVE_INFINITY,
    ),
  );
  console.log('\nSelf time by function, µs a request:\n');
  console.log(selfTimeTable(columns, Number(args['cpu-prof-rows'])));
}

await main();
