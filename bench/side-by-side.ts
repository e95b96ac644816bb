/**
 * Builds, or settings, measured at the same moment: `npm run bench -- side-by-side [--scenario get]
 * [--rounds 7] [--seconds 3] [--apart] [--backend sqlite|postgres] [--postgres-url URL]
 * NAME=<cli>[@VAR=value,VAR=value] …`, e.g.
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
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
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

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    scenario: { type: 'string', default: 'get' },
    rounds: { type: 'string', default: '7' },
    seconds: { type: 'string', default: '3' },
    apart: { type: 'boolean', default: false },
    backend: { type: 'string', default: 'sqlite' },
    'postgres-url': { type: 'string', default: BENCH_POSTGRES_URL },
  },
});
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
    const floor = await startScript('bench/fastify-floor.ts');
    await waitUntilUp(floor.url, floor.child, KEY);
    pin(floor.child.pid as number);
    targets.push({ name: 'floor', url: floor.url, child: floor.child, cpuPerRequest: [] });
    for (const spec of positionals) {
      const { name, cli, env: variables } = parseTarget(spec);
      const database = await benchDatabase(
        args.backend,
        args['postgres-url'],
        `petstore_side_${name.toLowerCase().replace(/[^a-z0-9]/g, '_')}`,
      );
      databases.push(database);
      const port = await freePort();
      const env = serviceEnv(KEY, database.url, { PORT: String(port), ...variables });
      seedDatabase(env, SIZE, cli);
      const child = spawn(process.execPath, [cli, 'serve'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
      const url = `http://127.0.0.1:${port}`;
      targets.push({ name, url, child, cpuPerRequest: [] });
      await waitUntilUp(url, child, KEY);
      pin(child.pid as number);
    }
    const mix = trafficFor(scenario, { size: SIZE, deepPages: [] });
    const measure = async (target: Target, seconds: number) => {
      const pid = target.child.pid as number;
      const before = cpuMicros(pid);
      const load = await runLoad({ url: target.url, key: KEY, connections: 32, seconds, mix }, LAST_CPU);
      if (load.non2xx > 0) throw new Error(`${target.name}: ${load.non2xx} answers not 2xx`);
      return { cpu: (cpuMicros(pid) - before) / load.requests, load };
    };
    // A first second each, not counted: the JIT's first compilations.
    await Promise.all(targets.map((target) => measure(target, 1)));
    for (let round = 1; round <= Number(args.rounds); round++) {
      const cells: string[] = [];
      const one = async (target: Target) => {
        const { cpu, load } = await measure(target, Number(args.seconds));
        target.cpuPerRequest.push(cpu);
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
  } finally {
    for (const target of targets) await stop(target.child);
    for (const database of databases) await database.drop();
  }
}

await main();
