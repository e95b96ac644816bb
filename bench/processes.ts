/**
 * The processes a benchmark starts and watches, shared by bench/run.ts and bench/profile.ts: the
 * service's environment and seeding, baseline scripts, the --neighbour busy loop, and what /proc says
 * about a process's CPU time and memory.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { adminQuery, createDatabase, type ThrowawayDatabase } from '../support/postgres-admin.js';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const TSX = ['--import', 'tsx'];
export const CLI = join(ROOT, 'dist/cli/main.js');
/** The PostgreSQL server benchmarks make their databases on (--postgres-url overrides it). */
export const BENCH_POSTGRES_URL =
  process.env.PETSTORE_BENCH_POSTGRES_URL ||
  process.env.PETSTORE_TEST_POSTGRES_URL ||
  'postgres://postgres@127.0.0.1:5432/test';
/** The CPU wrk is pinned to with --pin, and the one --neighbour keeps busy. */
export const LAST_CPU = String(availableParallelism() - 1);
/** util-linux's CPU-affinity command: named here only, used by pinned() and pinProcess(). */
const TASKSET = 'taskset';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject()));
    });
  });
}

/** The variables that are set: a child's environment takes strings only. */
export function definedOnly(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
}

/** The environment a service process gets: only what the benchmark sets, none of the caller's settings. */
export function serviceEnv(
  key: string,
  databaseUrl: string,
  extra: Record<string, string> = {},
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
  return {
    ...env,
    DATABASE_URL: databaseUrl,
    PETSTORE_API_KEYS: key,
    // The load is one key at 32 connections: the per-key limit would answer most of it 429.
    RATE_LIMIT_PER_SECOND: '0',
    // create-with-webhook delivers to a receiver in this process, on 127.0.0.1.
    WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
    ...extra,
  };
}

export function runToEnd(command: string, argv: string[], env: NodeJS.ProcessEnv): string {
  const result = spawnSync(command, argv, { cwd: ROOT, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) throw new Error(`${argv.join(' ')} failed:\n${result.stderr}`);
  return result.stdout;
}

/** Fills a database through the bulk path (`petstore seed`, i.e. createMany, not HTTP), by `cli`. */
export function seedDatabase(env: NodeJS.ProcessEnv, size: number, cli = CLI): void {
  // seed fills an existing database only: migrate creates it.
  runToEnd(process.execPath, [cli, 'migrate'], env);
  runToEnd(process.execPath, [cli, 'seed', '--count', String(size)], env);
}

/** A SQLite file in a directory of its own, removed by `drop`. */
export function sqliteDatabase(): ThrowawayDatabase {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-'));
  return { url: `sqlite:${join(dir, 'bench.db')}`, drop: async () => rmSync(dir, { recursive: true }) };
}

/**
 * A database of its own on `backend` (a tool's --backend): a SQLite file, or a PostgreSQL database named
 * after `name` on the server of `postgresUrl` (--postgres-url), which must answer first.
 */
export async function benchDatabase(
  backend: string | undefined,
  postgresUrl: string,
  name: string,
): Promise<ThrowawayDatabase> {
  if (backend === 'sqlite') return sqliteDatabase();
  if (backend !== 'postgres') throw new Error(`--backend is sqlite or postgres, not ${backend}`);
  await adminQuery(postgresUrl, 'SELECT 1');
  return createDatabase(postgresUrl, name);
}

export async function waitUntilUp(url: string, child: ChildProcess, key: string): Promise<void> {
  for (let attempt = 0; attempt < 600; attempt++) {
    if (child.exitCode !== null) throw new Error(`${url}: the process exited (${child.exitCode})`);
    try {
      const res = await fetch(`${url}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${key}` } });
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not come up`);
}

export function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/**
 * A baseline (bench/reference-server.ts, bench/fastify-floor.ts) on a free port, through tsx.
 * `nodeArgs` go before the script (e.g. --trace-gc); stdout is dropped unless asked for.
 */
export async function startScript(
  script: string,
  {
    nodeArgs = [],
    env,
    stdout = 'ignore',
  }: { nodeArgs?: string[]; env?: NodeJS.ProcessEnv; stdout?: 'ignore' | 'pipe' } = {},
): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(process.execPath, [...nodeArgs, ...TSX, script, String(port)], {
    cwd: ROOT,
    ...(env ? { env } : {}),
    stdio: ['ignore', stdout, 'inherit'],
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

/**
 * CPU pinning, the one place it is spelt: `argv` (a command and its arguments) run on `cpus` (taskset's
 * list, e.g. `0` or `0-2`), or as it is when `cpus` is undefined. Returns what spawn takes.
 */
export function pinned(cpus: string | undefined, argv: readonly string[]): [string, string[]] {
  return cpus ? [TASKSET, ['-c', cpus, ...argv]] : [argv[0] as string, argv.slice(1)];
}

/**
 * --neighbour: a busy loop on the last CPU (the one wrk runs on with --pin), for the whole run, as a
 * production machine is rarely quiet. Killed with the benchmark, whatever ends it.
 */
export function startNeighbour(log: (message: string) => void): ChildProcess {
  const child = spawn(...pinned(LAST_CPU, [process.execPath, '-e', 'for (;;) {}']), { stdio: 'ignore' });
  process.once('exit', () => child.kill('SIGKILL'));
  log(`neighbour: a busy loop on CPU ${LAST_CPU} (pid ${child.pid})`);
  return child;
}

/** The children of a process (the workers of `serve --workers`), from /proc. */
function childrenOf(pid: number): number[] {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return children ? children.split(/\s+/).map(Number) : [];
}

/** Moves a process, every thread of it and of its children (the workers of `serve --workers`), to `cpus`. */
export function pinProcess(pid: number, cpus: string): void {
  runToEnd(TASKSET, ['-a', '-p', '-c', cpus, String(pid)], process.env);
  try {
    for (const child of childrenOf(pid)) pinProcess(child, cpus);
  } catch {
    // exited meanwhile
  }
}

/** Resident memory of a process and its children (the workers of `serve --workers`), in bytes. */
export function residentBytes(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    return kib * 1024 + childrenOf(pid).reduce((sum, child) => sum + residentBytes(child), 0);
  } catch {
    return 0;
  }
}

export const CLOCK_TICKS =
  Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/**
 * The CPU time (utime + stime) in a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat line, in
 * microseconds; undefined when the line is not one. The command, in parentheses, may itself hold
 * spaces and parentheses: fields are counted from the last ") ".
 */
export function statCpuMicros(line: string): number | undefined {
  const end = line.lastIndexOf(') ');
  if (end < 0) return undefined;
  const fields = line.slice(end + 2).split(' ');
  // utime and stime are fields 14 and 15 of the line (11 and 12 after the command), in clock ticks.
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  if (fields.length < 13 || !Number.isInteger(utime) || !Number.isInteger(stime)) return undefined;
  return ((utime + stime) * 1e6) / CLOCK_TICKS;
}

/**
 * CPU time (user + system) a process and its children have used, in microseconds. Per request, it is
 * the figure a busy shared machine disturbs least: neighbours steal wall-clock time, not our CPU time.
 */
export function cpuMicros(pid: number): number {
  try {
    const own = statCpuMicros(readFileSync(`/proc/${pid}/stat`, 'utf8')) ?? Number.NaN;
    return own + childrenOf(pid).reduce((sum, child) => sum + cpuMicros(child), 0);
  } catch {
    return 0;
  }
}
