/**
 * A create's CPU on the request path, with one webhook endpoint against none:
 * `npm run bench -- create-request-path [--backend sqlite|postgres] [--rounds 3] [--seconds 4]
 * [--warm-up 2] [--connections 32] [--postgres-url URL]` (after `npm run build`).
 *
 * A `serve --role api` process (it delivers nothing, so a delivery's own CPU is not counted in a
 * create's) pinned to CPU 0, wrk on the last CPU (bench/load.ts), --warm-up seconds of creates, then
 * --seconds measured: the process's CPU from /proc over the creates answered. Each round measures no
 * endpoint, then one (registered to a closed port, 127.0.0.1:9, never reached by a `--role api`
 * process), each on a database of its own, so the two take turns through the machine's noise. Prints
 * one line per measurement.
 */
import { parseArgs } from 'node:util';
import type { ThrowawayDatabase } from '../support/postgres-admin.js';
import { startRole } from './delivery-lag.js';
import { ensureWrk, runLoad } from './load.js';
import {
  BENCH_POSTGRES_URL,
  benchDatabase,
  CLI,
  cpuMicros,
  LAST_CPU,
  runToEnd,
  serviceEnv,
  stop,
} from './processes.js';

const { values: args } = parseArgs({
  options: {
    backend: { type: 'string', default: 'sqlite' },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '4' },
    'warm-up': { type: 'string', default: '2' },
    connections: { type: 'string', default: '32' },
    'postgres-url': { type: 'string', default: BENCH_POSTGRES_URL },
  },
});
if (args.backend !== 'sqlite' && args.backend !== 'postgres')
  throw new Error(`--backend is sqlite or postgres, not ${args.backend}`);
const KEY = 'create-cost-key-0123456789abcdef';
/** The service's CPU; wrk runs on the last one. */
const SERVICE_CPU = '0';

const newDatabase = (): Promise<ThrowawayDatabase> =>
  benchDatabase(args.backend, args['postgres-url'], 'petstore_create_path');

/** One measurement: µs of the API process's CPU per create, and the creates measured. */
async function measure(endpoints: 0 | 1): Promise<{ micros: number; creates: number }> {
  const database = await newDatabase();
  const env = serviceEnv(KEY, database.url, { LOG_REQUESTS: 'true' });
  runToEnd(process.execPath, [CLI, 'migrate'], env);
  const api = await startRole(CLI, 'api', env, KEY, SERVICE_CPU);
  try {
    if (endpoints === 1) {
      const res = await fetch(`${api.url}/v1/webhook-endpoints`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: 'http://127.0.0.1:9/hook' }),
      });
      if (res.status !== 201) throw new Error(`registering the endpoint: ${res.status} ${await res.text()}`);
    }
    const spec = {
      url: `${api.url}/v1/pets`,
      key: KEY,
      connections: Number(args.connections),
      mix: [{ kind: 'create' as const }],
    };
    await runLoad({ ...spec, seconds: Number(args['warm-up']) }, LAST_CPU);
    const pid = api.child.pid as number;
    const before = cpuMicros(pid);
    const load = await runLoad({ ...spec, seconds: Number(args.seconds) }, LAST_CPU);
    const micros = (cpuMicros(pid) - before) / load.requests;
    return { micros, creates: load.requests };
  } finally {
    await stop(api.child);
    await database.drop();
  }
}

ensureWrk(console.error);
for (let round = 1; round <= Number(args.rounds); round++)
  for (const endpoints of [0, 1] as const) {
    const { micros, creates } = await measure(endpoints);
    console.log(
      `${args.backend} round ${round} endpoints=${endpoints}: ${micros.toFixed(0)} µs CPU per create, ${creates} creates`,
    );
  }
