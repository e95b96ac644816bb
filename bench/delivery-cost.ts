/**
 * What one delivery costs a `--role deliver` process: `npx tsx bench/delivery-cost.ts [--deliveries N]
 * [--rounds R] [--backend sqlite|postgres] [--postgres-url URL] [--cli other/dist/cli/main.js]`.
 *
 * Per round: a `--role api` process registers one endpoint (bench/webhook-receiver.ts, answering 204 at
 * once) and takes N creates, 16 at a time, then stops; a `--role deliver` process then delivers the N
 * deliveries owed. Its CPU from its first delivery to its last (its start-up left out), per delivery,
 * and deliveries per second. With --cli, each round measures this build and the other one after it,
 * and the ratio of their medians is printed: the machine's noise touches both alike.
 */
import type { ChildProcess } from 'node:child_process';
import { parseArgs } from 'node:util';
import { adminQuery, createDatabase, type ThrowawayDatabase } from '../support/postgres-admin.js';
import { Receiver, startRole } from './delivery-lag.js';
import { CLI, cpuMicros, LAST_CPU, runToEnd, serviceEnv, sqliteDatabase, stop } from './processes.js';

const { values: args } = parseArgs({
  options: {
    deliveries: { type: 'string', default: '10000' },
    rounds: { type: 'string', default: '3' },
    backend: { type: 'string', default: 'sqlite' },
    'postgres-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
    cli: { type: 'string' },
  },
});
const N = Number(args.deliveries);
const KEY = 'delivery-cost-key-0123456789abcdef';

async function newDatabase(): Promise<ThrowawayDatabase> {
  if (args.backend === 'sqlite') return sqliteDatabase();
  await adminQuery(args['postgres-url'], 'SELECT 1');
  return createDatabase(args['postgres-url'], 'petstore_delivery_cost');
}

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
    const started = await startRole(cli, 'deliver', env, KEY);
    deliver = started.child;
    const pid = deliver.pid as number;
    // Measured from the first delivery to the last: the process's start-up is not a delivery's cost.
    while ((await receiver.poll()) === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const [cpuFrom, wallFrom, from] = [cpuMicros(pid), performance.now(), receiver.received];
    while ((await receiver.poll()) < N) await new Promise((resolve) => setTimeout(resolve, 20));
    const delivered = receiver.received - from;
    return {
      micros: (cpuMicros(pid) - cpuFrom) / delivered,
      perSecond: delivered / ((performance.now() - wallFrom) / 1000),
    };
  } finally {
    if (deliver) await stop(deliver);
    await receiver.close();
    await database.drop();
  }
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
const builds = args.cli ? [CLI, args.cli] : [CLI];
const results = new Map(builds.map((cli) => [cli, [] as { micros: number; perSecond: number }[]]));
for (let r = 0; r < Number(args.rounds); r++) {
  for (const cli of builds) {
    const result = await round(cli);
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
if (medians.length === 2)
  console.log(
    `this build / the other: ${((medians[0]?.micros ?? 0) / (medians[1]?.micros ?? 1)).toFixed(2)} of its CPU a delivery`,
  );
