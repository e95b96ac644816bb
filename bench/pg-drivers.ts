/**
 * The PostgreSQL driver comparison (issue 42): `pg` as the service uses it, `pg` with `pg-native`
 * (libpq), and `postgres` (postgres.js), running the service's get, list and create statements with no
 * HTTP (bench/pg-driver-clients.ts), each in a process of its own. The drivers take turns in rounds
 * (round 1: get with pg, pg-native, postgres, then list…, then create…; round 2: the same…), each turn
 * `--seconds` long from `--connections` concurrent loops; a turn's figures are the driver process's CPU
 * (process.cpuUsage: user + system) per query and its queries per second. The table gives each driver's
 * medians over the rounds and, as the figure to compare, the median over the rounds of its CPU per query
 * as a multiple of pg's in the same round. Also counted: the round trips of one create (a proxy in front
 * of PostgreSQL counts the turns from the server answering to the client sending).
 *
 *   npm run bench -- pg-drivers [--rounds 3] [--seconds 4] [--connections 32] [--pool-size 10]
 *     [--size 10000] [--drivers pg,pg-native,postgres] [--postgres-url postgres://…]
 *
 * pg-native is not a dependency of the project (it needs libpq's headers to build): the first run
 * installs it, at a pinned version, into bench/.drivers (git-ignored) and loads it from there; without
 * libpq-dev it is left out with a message saying so.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Server } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { migrate } from '../src/storage/postgres/migrations.js';
import { adminQuery, createDatabase } from '../support/postgres-admin.js';
import {
  DRIVERS,
  type DriverName,
  type DriverSpec,
  drive,
  OPERATIONS,
  type Operation,
  openDriver,
  type Turn,
} from './pg-driver-clients.js';
import { BENCH_POSTGRES_URL, ROOT, TSX } from './processes.js';
import { median } from './rounds.js';

const PG_NATIVE_VERSION = '3.9.0';
const DRIVERS_DIR = join(ROOT, 'bench/.drivers');

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '4' },
    connections: { type: 'string', default: '32' },
    'pool-size': { type: 'string', default: '10' },
    size: { type: 'string', default: '10000' },
    drivers: { type: 'string', default: DRIVERS.join(',') },
    'postgres-url': { type: 'string', default: BENCH_POSTGRES_URL },
    /** Internal: this process is one driver's load process (a JSON DriverSpec & connections follow). */
    child: { type: 'string' },
  },
});

type ChildRequest = { operation: Operation; seconds: number } | { roundTrips: true };
type ChildReply = Turn | Record<Operation, RoundTrips> | { ready: true };

// ---------------------------------------------------------------------------------------------------
// The load process of one driver.

/**
 * A TCP proxy to PostgreSQL counting round trips: each time the client sends after the server last
 * spoke (the client's first bytes included) is one.
 */
async function countingProxy(target: URL): Promise<{ url: string; trips: () => number; server: Server }> {
  let trips = 0;
  const server = createServer((client) => {
    const upstream = createConnection(Number(target.port || 5432), target.hostname);
    let serverSpokeLast = true;
    client.on('data', (chunk) => {
      if (serverSpokeLast) trips++;
      serverSpokeLast = false;
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      serverSpokeLast = true;
      client.write(chunk);
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target.href);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as { port: number }).port);
  return { url: url.href, trips: () => trips, server };
}

interface RoundTrips {
  /** Once every statement is prepared on the connection. */
  steady: number;
  /** The first time, statements prepared with it. */
  first: number;
}

/** Round trips of each operation on a one-connection pool through the proxy: the first and a later one. */
async function roundTrips(name: DriverName, spec: DriverSpec): Promise<Record<Operation, RoundTrips>> {
  const proxy = await countingProxy(new URL(spec.url));
  const driver = openDriver(name, { ...spec, url: proxy.url, poolSize: 1 });
  const count = async (operation: Operation) => {
    const before = proxy.trips();
    await driver.run(operation);
    return proxy.trips() - before;
  };
  await driver.ping(); // connects (the startup's round trips are not an operation's)
  const result = {} as Record<Operation, RoundTrips>;
  for (const operation of OPERATIONS) {
    const first = await count(operation);
    await count(operation);
    result[operation] = { first, steady: await count(operation) };
  }
  await driver.end();
  proxy.server.close();
  return result;
}

async function runChild(name: DriverName, spec: DriverSpec & { connections: number }): Promise<void> {
  const driver = openDriver(name, spec);
  const send = (reply: ChildReply) => (process.send as (message: unknown) => boolean)(reply);
  const turn = (operation: Operation, seconds: number): Promise<Turn> =>
    drive(() => driver.run(operation), spec.connections, seconds);
  // Every connection opened and every statement prepared before the first measured turn.
  for (const operation of OPERATIONS) await turn(operation, 0.5);
  process.on('message', (request: ChildRequest) => {
    const reply = 'roundTrips' in request ? roundTrips(name, spec) : turn(request.operation, request.seconds);
    reply.then(send, (error: Error) => {
      process.stderr.write(`${name}: ${error.stack ?? error.message}\n`);
      process.exit(1);
    });
  });
  process.on('disconnect', () => {
    void driver.end().finally(() => process.exit(0));
  });
  send({ ready: true });
}

// ---------------------------------------------------------------------------------------------------
// The coordinator.

const log = (line: string) => process.stderr.write(`pg-drivers: ${line}\n`);

/** pg-native in bench/.drivers, installed at PG_NATIVE_VERSION the first time; undefined if it cannot be. */
function ensurePgNative(): string | undefined {
  const modules = join(DRIVERS_DIR, 'node_modules');
  const installed = join(modules, 'pg-native/package.json');
  if (
    existsSync(installed) &&
    (JSON.parse(readFileSync(installed, 'utf8')) as { version: string }).version === PG_NATIVE_VERSION
  )
    return modules;
  const includeDir = spawnSync('pg_config', ['--includedir'], { encoding: 'utf8' });
  if (includeDir.status !== 0 || !existsSync(join(includeDir.stdout.trim(), 'libpq-fe.h'))) {
    log(
      'pg-native left out: building it needs libpq headers and pg_config (Debian/Ubuntu: `apt-get install -y libpq-dev`; ' +
        'then run this again and it installs pg-native into bench/.drivers)',
    );
    return undefined;
  }
  log(`installing pg-native@${PG_NATIVE_VERSION} into bench/.drivers (not a project dependency)`);
  mkdirSync(DRIVERS_DIR, { recursive: true });
  writeFileSync(
    join(DRIVERS_DIR, 'package.json'),
    `${JSON.stringify(
      {
        private: true,
        description: 'pg-native for bench/pg-drivers.ts only, installed by it (git-ignored)',
        dependencies: { 'pg-native': PG_NATIVE_VERSION },
        // libpq's install script is its node-gyp build.
        allowScripts: { libpq: true },
      },
      null,
      2,
    )}\n`,
  );
  const install = spawnSync('npm', ['install', '--prefix', DRIVERS_DIR, '--no-audit', '--no-fund'], {
    encoding: 'utf8',
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (install.status !== 0 || !existsSync(installed)) {
    log('pg-native left out: its install failed (see above)');
    return undefined;
  }
  return modules;
}

async function seededDatabase(url: string, size: number) {
  const database = await createDatabase(url, 'petstore_drivers');
  const pool = new pg.Pool({ connectionString: database.url, max: 1 });
  try {
    await migrate(pool);
    await pool.query(
      `INSERT INTO pets (name, category_id, status)
       SELECT 'pet ' || n, 1 + n % 10, (ARRAY['available', 'pending', 'sold'])[1 + n % 3]
       FROM generate_series(1, $1::int) AS n`,
      [size],
    );
    await pool.query('ANALYZE');
  } finally {
    await pool.end();
  }
  return database;
}

function startChild(name: DriverName, spec: object, nodePath: string | undefined): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [...TSX, join(ROOT, 'bench/pg-drivers.ts'), '--child', name, JSON.stringify(spec)],
    {
      cwd: ROOT,
      env: { ...process.env, ...(nodePath ? { NODE_PATH: nodePath } : {}) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    },
  );
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`${name}'s load process exited (${code})`)));
  });
}

function ask<T>(child: ChildProcess, request: ChildRequest): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`a load process exited (${code})`));
    child.once('exit', onExit);
    child.once('message', (reply) => {
      child.off('exit', onExit);
      resolve(reply as T);
    });
    child.send(request);
  });
}

const versionOf = (name: string, modules = join(ROOT, 'node_modules')) =>
  (JSON.parse(readFileSync(join(modules, name, 'package.json'), 'utf8')) as { version: string }).version;

async function main(): Promise<void> {
  const rounds = Number(args.rounds);
  const seconds = Number(args.seconds);
  const connections = Number(args.connections);
  const size = Number(args.size);
  const url = args['postgres-url'] as string;
  let drivers = (args.drivers as string).split(',').map((d) => d.trim()) as DriverName[];
  for (const driver of drivers)
    if (!DRIVERS.includes(driver)) throw new Error(`unknown driver ${driver} (${DRIVERS.join(', ')})`);
  const nodePath = drivers.includes('pg-native') ? ensurePgNative() : undefined;
  if (!nodePath) drivers = drivers.filter((d) => d !== 'pg-native');

  await adminQuery(url, 'SELECT 1');
  const loadBefore = loadavg()[0] as number;
  log(`seeding ${size} pets`);
  const database = await seededDatabase(url, size);
  const spec = {
    url: database.url,
    poolSize: Number(args['pool-size']),
    size,
    timeoutMs: 5_000,
    connections,
  };
  const children = new Map<DriverName, ChildProcess>();
  const turns = new Map<string, Turn[]>();
  const trips = new Map<DriverName, Record<Operation, RoundTrips>>();
  try {
    for (const driver of drivers) children.set(driver, await startChild(driver, spec, nodePath));
    for (let round = 1; round <= rounds; round++)
      for (const operation of OPERATIONS)
        for (const driver of drivers) {
          const turn = await ask<Turn>(children.get(driver) as ChildProcess, { operation, seconds });
          const key = `${operation}:${driver}`;
          turns.set(key, [...(turns.get(key) ?? []), turn]);
          log(
            `round ${round} ${operation} ${driver}: ${Math.round(turn.queries / turn.seconds)}/s, ` +
              `${(turn.cpuMicros / turn.queries).toFixed(1)} µs CPU a query`,
          );
        }
    for (const driver of drivers)
      trips.set(driver, await ask(children.get(driver) as ChildProcess, { roundTrips: true }));
  } finally {
    const running = [...children.values()].filter((child) => child.exitCode === null && child.connected);
    for (const child of running) child.disconnect();
    await Promise.all(running.map((child) => new Promise((resolve) => child.once('exit', resolve))));
    await database.drop();
  }

  const cpuPerQuery = (turn: Turn) => turn.cpuMicros / Math.max(1, turn.queries);
  const lines = [
    `${rounds} rounds × ${seconds} s a driver and operation, ${connections} concurrent loops, pool of ${spec.poolSize}, ` +
      `${size} pets; ${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'}, load ${loadBefore.toFixed(1)} before, ` +
      `${(loadavg()[0] as number).toFixed(1)} after; node ${process.version}, pg ${versionOf('pg')}` +
      `${nodePath ? `, pg-native ${versionOf('pg-native', nodePath)} (libpq ${versionOf('libpq', nodePath)})` : ''}` +
      `${drivers.includes('postgres') ? `, postgres ${versionOf('postgres')}` : ''}.`,
    '',
    '| operation | driver | CPU µs a query (median) | CPU × pg (median of rounds) | queries/s (median) | round trips |',
    '|---|---|--:|--:|--:|--:|',
  ];
  for (const operation of OPERATIONS)
    for (const driver of drivers) {
      const own = turns.get(`${operation}:${driver}`) ?? [];
      const pgTurns = turns.get(`${operation}:pg`);
      const ratios = pgTurns ? own.map((turn, i) => cpuPerQuery(turn) / cpuPerQuery(pgTurns[i] as Turn)) : [];
      const trip = trips.get(driver)?.[operation];
      lines.push(
        `| ${operation} | ${driver} | ${median(own.map(cpuPerQuery)).toFixed(1)} | ${
          ratios.length ? `${median(ratios).toFixed(2)} (${ratios.map((r) => r.toFixed(2)).join(', ')})` : '–'
        } | ${Math.round(median(own.map((turn) => turn.queries / turn.seconds)))} | ${
          trip ? `${trip.steady}${trip.first === trip.steady ? '' : ` (first: ${trip.first})`}` : '–'
        } |`,
      );
    }
  process.stdout.write(`${lines.join('\n')}\n`);
}

if (args.child) {
  await runChild(args.child as DriverName, JSON.parse(positionals[0] as string));
} else {
  await main();
}
