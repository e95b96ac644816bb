/**
 * The live event stream's figures (`npm run bench -- event-stream [--rate 50] [--seconds 10] [--reads 4000]`,
 * after `npm run build`):
 *
 * 1. Latency, PostgreSQL: two `serve` processes on one database; creates paced at RATE per second (far
 *    from saturation) through node A while a stream is open on node B: the time from each 201 to the
 *    pet's message on B's stream, p50, p99 and max.
 * 2. Latency, SQLite: two `serve` processes on one file (as `--workers` runs them, each with a port of
 *    its own so that the stream is on the process that does not write), the same paced creates.
 * 3. What idle streams cost a read: the server's CPU per `GET /v1/pets?limit=20` (READS of them, 8 at a
 *    time) with no stream open, then with 1,000 idle streams open on the node; twice, alternated.
 *
 * A measurement, not a test: nothing is asserted; the figures are printed as one JSON line.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { request } from 'node:http';
import { parseArgs } from 'node:util';
import { ServerSentEventParser } from '../packages/client/src/server-sent-events.js';
import { createSchema } from '../support/postgres-admin.js';
import {
  BENCH_POSTGRES_URL,
  CLI,
  cpuMicros,
  freePort,
  ROOT,
  serviceEnv,
  sqliteDatabase,
  stop,
  waitUntilUp,
} from './processes.js';

const KEY = 'bench-event-stream-key-0123456789';
const { values: args } = parseArgs({
  options: {
    rate: { type: 'string', default: '50' },
    seconds: { type: 'string', default: '10' },
    reads: { type: 'string', default: '4000' },
  },
});
const RATE = Number(args.rate);
const SECONDS = Number(args.seconds);
const READS = Number(args.reads);
const POSTGRES = BENCH_POSTGRES_URL;

async function serve(databaseUrl: string, args: string[] = [], extra: Record<string, string> = {}) {
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, 'serve', ...args], {
    cwd: ROOT,
    env: serviceEnv(KEY, databaseUrl, { PORT: String(port), LOG_LEVEL: 'warn', ...extra }),
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}`;
  await waitUntilUp(url, child, KEY);
  return { url, child };
}

/** A stream whose pet.created messages are noted with their arrival time, by pet id. */
function stream(url: string, arrivals: Map<number, number[]>, after = 0): () => void {
  const parser = new ServerSentEventParser({
    event: ({ type, data }) => {
      if (type !== 'pet.created') return;
      const id = (JSON.parse(data) as { data: { id: number } }).data.id;
      arrivals.set(id, [...(arrivals.get(id) ?? []), performance.now()]);
    },
  });
  const req = request(`${url}/v1/events?type=pet.created&after=${after}`, {
    agent: false,
    headers: { accept: 'text/event-stream', authorization: `Bearer ${KEY}` },
  });
  req.on('response', (res) => res.on('data', (chunk: Buffer) => parser.push(chunk)));
  req.on('error', () => undefined);
  req.end();
  return () => req.destroy();
}

/** Creates paced at RATE for SECONDS through `url`; resolves to each pet's 201 time, by id. */
async function pacedCreates(url: string): Promise<Map<number, number>> {
  const created = new Map<number, number>();
  const started = performance.now();
  const pending: Promise<void>[] = [];
  for (let n = 0; n < RATE * SECONDS; n++) {
    const due = started + (n * 1000) / RATE;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
    pending.push(
      fetch(`${url}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `paced ${n}`, categoryId: 1 }),
      }).then(async (res) => {
        const { id } = (await res.json()) as { id: number };
        created.set(id, performance.now());
      }),
    );
  }
  await Promise.all(pending);
  await new Promise((resolve) => setTimeout(resolve, 2_000)); // the last messages
  return created;
}

function latencies(created: Map<number, number>, arrivals: Map<number, number[]>, streams: number) {
  const values: number[] = [];
  let missing = 0;
  for (const [id, at] of created) {
    const arrived = arrivals.get(id) ?? [];
    missing += streams - arrived.length;
    for (const time of arrived) values.push(time - at);
  }
  values.sort((a, b) => a - b);
  const at = (p: number) =>
    values[Math.min(values.length - 1, Math.ceil(p * values.length) - 1)] ?? Number.NaN;
  const round = (ms: number) => Math.round(ms * 10) / 10;
  return {
    messages: values.length,
    missing,
    p50Ms: round(at(0.5)),
    p99Ms: round(at(0.99)),
    maxMs: round(at(1)),
  };
}

async function postgresLatency() {
  const database = await createSchema(POSTGRES, 'bench_stream');
  const nodes: ChildProcess[] = [];
  try {
    const a = await serve(database.url);
    const b = await serve(database.url);
    nodes.push(a.child, b.child);
    const arrivals = new Map<number, number[]>();
    const close = stream(b.url, arrivals);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const result = latencies(await pacedCreates(a.url), arrivals, 1);
    close();
    return result;
  } finally {
    await Promise.all(nodes.map(stop));
    await database.drop();
  }
}

async function sqliteLatency() {
  const database = sqliteDatabase();
  const nodes: ChildProcess[] = [];
  try {
    // Two processes on one file, as --workers runs them, each on a port of its own so that the stream
    // is on the one that does not write. Started one after the other: the first migrates.
    const a = await serve(database.url);
    const b = await serve(database.url);
    nodes.push(a.child, b.child);
    const arrivals = new Map<number, number[]>();
    const close = stream(b.url, arrivals);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const result = latencies(await pacedCreates(a.url), arrivals, 1);
    close();
    return result;
  } finally {
    await Promise.all(nodes.map(stop));
    await database.drop();
  }
}

/** The server's CPU microseconds per read, READS reads 8 at a time. */
async function cpuPerRead(url: string, pid: number): Promise<number> {
  let next = 0;
  const worker = async () => {
    while (next++ < READS)
      await (await fetch(`${url}/v1/pets?limit=20`, { headers: { authorization: `Bearer ${KEY}` } })).text();
  };
  const before = cpuMicros(pid);
  await Promise.all(Array.from({ length: 8 }, worker));
  return (cpuMicros(pid) - before) / READS;
}

async function idleStreamsCost() {
  const database = sqliteDatabase();
  const { url, child } = await serve(database.url, [], { EVENT_STREAM_MAX_PER_KEY: '1000' });
  try {
    for (let n = 0; n < 100; n++)
      await fetch(`${url}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `pet ${n}`, categoryId: 1 }),
      });
    const pid = child.pid as number;
    await cpuPerRead(url, pid); // warm-up
    // Alternated, twice each: a shared machine's noise shows as the spread between rounds.
    const none: number[] = [];
    const thousand: number[] = [];
    for (let round = 0; round < 2; round++) {
      none.push(Math.round(await cpuPerRead(url, pid)));
      // Idle: after an id far beyond the last, nothing to send.
      const closers = Array.from({ length: 1_000 }, () => stream(url, new Map(), 2 ** 50));
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      thousand.push(Math.round(await cpuPerRead(url, pid)));
      for (const close of closers) close();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    return { cpuPerReadUs: { noStreams: none, thousandIdleStreams: thousand } };
  } finally {
    await stop(child);
    await database.drop();
  }
}

const result = {
  postgresTwoNodes: await postgresLatency(),
  sqliteTwoWorkers: await sqliteLatency(),
  idleStreams: await idleStreamsCost(),
};
console.log(JSON.stringify(result));
