/**
 * What one delivery costs a `--role deliver` process: `npm run bench -- delivery-cost [--deliveries N]
 * [--rounds R] [--backend sqlite|postgres] [--postgres-url URL] [--cli other/dist/cli/main.js]
 * [--profile dir] [--floor]`.
 *
 * Per round: a `--role api` process registers one endpoint (bench/webhook-receiver.ts, answering 204 at
 * once) and takes N creates, 16 at a time, then stops; a `--role deliver` process then delivers the N
 * deliveries owed. Its CPU from its first delivery to its last (its start-up left out), per delivery,
 * and deliveries per second. With --cli, each round measures this build and the other one after it,
 * and the ratio of their medians is printed: the machine's noise touches both alike. With --floor, each
 * round also measures the same N POSTs made by the service's sender with no database
 * (bench/bare-sender.ts): the floor a delivery's HTTP exchange and signature set; and by the service's
 * delivery loop from a queue in memory (bench/deliverer-no-database.ts): what the loop adds to the floor,
 * the database being the rest.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import type { ThrowawayDatabase } from '../support/postgres-admin.js';
import { Receiver, startRole } from './delivery-lag.js';
import {
  BENCH_POSTGRES_URL,
  benchDatabase,
  CLI,
  cpuMicros,
  LAST_CPU,
  ROOT,
  runToEnd,
  serviceEnv,
  stop,
  TSX,
} from './processes.js';
import { median } from './rounds.js';

const { values: args } = parseArgs({
  options: {
    deliveries: { type: 'string', default: '10000' },
    rounds: { type: 'string', default: '3' },
    backend: { type: 'string', default: 'sqlite' },
    'postgres-url': { type: 'string', default: BENCH_POSTGRES_URL },
    cli: { type: 'string' },
    // Writes a V8 CPU profile of each measured process (its start-up included) into this folder.
    profile: { type: 'string' },
    // Each round also measures bench/bare-sender.ts: the same POSTs with no database.
    floor: { type: 'boolean', default: false },
  },
});
const N = Number(args.deliveries);
const KEY = 'delivery-cost-key-0123456789abcdef';

const newDatabase = (): Promise<ThrowawayDatabase> =>
  benchDatabase(args.backend, args['postgres-url'], 'petstore_delivery_cost');

/** One round with one build: µs of the deliver process's CPU per delivery, and deliveries per second. */
async function round(cli: string): Promise<{ micros: number; perSecond: number }> {
  const database = await newDatabase();
  const env = serviceEnv(KEY, database.url, { LOG_REQUESTS: 'false' });
  runToEnd(process.execPath, [cli, 'migrate'], env);
  const receiver = new Receiver();
  const hook = await receiver.start(false, LAST_CPU);
  let deliver: ChildProcess | undefined;
  try {
    const api = await startRole(cli, 'api', env, KEY);
    const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
    const endpoint = await fetch(`${api.url}/v1/webhook-endpoints`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ url: hook }),
    });
    if (endpoint.status !== 201) throw new Error(`the endpoint: ${endpoint.status} ${await endpoint.text()}`);
    let sent = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (sent < N) {
          sent++;
          const res = await fetch(`${api.url}/v1/pets`, {
            method: 'POST',
            headers,
            body: '{"name":"x","categoryId":1}',
          });
          if (res.status !== 201) throw new Error(`a create: ${res.status} ${await res.text()}`);
        }
      }),
    );
    await stop(api.child);
    const started = await startRole(cli, 'deliver', env, KEY, undefined, profiled());
    deliver = started.child;
    return await measured(deliver.pid as number, receiver);
  } finally {
    if (deliver) await stop(deliver);
    await receiver.close();
    await database.drop();
  }
}

/**
 * The CPU of process `pid` per delivery from the first to arrive at `receiver` to the Nth, and the
 * deliveries per second between: the process's start-up is not a delivery's cost.
 */
async function measured(pid: number, receiver: Receiver): Promise<{ micros: number; perSecond: number }> {
  while ((await receiver.poll()) === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  const [cpuFrom, wallFrom, from] = [cpuMicros(pid), performance.now(), receiver.received];
  while ((await receiver.poll()) < N) await new Promise((resolve) => setTimeout(resolve, 20));
  const delivered = receiver.received - from;
  return {
    micros: (cpuMicros(pid) - cpuFrom) / delivered,
    perSecond: delivered / ((performance.now() - wallFrom) / 1000),
  };
}

/** With --profile, the node flags that write a measured process's V8 CPU profile into that folder. */
const profiled = (): string[] => (args.profile ? ['--cpu-prof', `--cpu-prof-dir=${args.profile}`] : []);

/**
 * The same N POSTs in a process with no database: by the service's sender alone (bench/bare-sender.ts),
 * or by its delivery loop from a queue in memory (bench/deliverer-no-database.ts).
 */
async function floorRound(script: string): Promise<{ micros: number; perSecond: number }> {
  const receiver = new Receiver();
  const hook = await receiver.start(false, LAST_CPU);
  const child = spawn(process.execPath, [...profiled(), ...TSX, script, hook, String(N)], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    return await measured(child.pid as number, receiver);
  } finally {
    await stop(child);
    await receiver.close();
  }
}

const FLOOR = 'the sender with no database (bench/bare-sender.ts)';
const LOOP = 'the delivery loop with no database (bench/deliverer-no-database.ts)';
const builds = [CLI, ...(args.cli ? [args.cli] : []), ...(args.floor ? [FLOOR, LOOP] : [])];
const results = new Map(builds.map((cli) => [cli, [] as { micros: number; perSecond: number }[]]));
for (let r = 0; r < Number(args.rounds); r++) {
  for (const cli of builds) {
    const result =
      cli === FLOOR
        ? await floorRound('bench/bare-sender.ts')
        : cli === LOOP
          ? await floorRound('bench/deliverer-no-database.ts')
          : await round(cli);
    results.get(cli)?.push(result);
    console.log(
      `round ${r + 1}, ${cli}: ${result.micros.toFixed(0)} µs of CPU a delivery, ${result.perSecond.toFixed(0)}/s`,
    );
  }
}
const medians = builds.map((cli) => {
  const runs = results.get(cli) ?? [];
  return { cli, micros: median(runs.map((x) => x.micros)), perSecond: median(runs.map((x) => x.perSecond)) };
});
for (const m of medians)
  console.log(
    `${m.cli} (${args.backend}): median ${m.micros.toFixed(0)} µs of CPU a delivery, ${m.perSecond.toFixed(0)} deliveries/s, ${(1e6 / m.micros).toFixed(0)} a second per core of CPU`,
  );
for (const other of medians.slice(1))
  console.log(
    `this build / ${other.cli}: ${((medians[0]?.micros ?? 0) / other.micros).toFixed(2)} of its CPU a delivery`,
  );
