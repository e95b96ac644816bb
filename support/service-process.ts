/**
 * `petstore` as a child process, for everything that needs the real executable: the tests of the command
 * line and of faults, the benchmark and the soak. One way to start it, learn where it listens and stop it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { type Dirent, existsSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeConfig } from '../src/config/config.js';

/**
 * The repository root: the CLI runs from here by default. Found through package.json's real path, so
 * that from the tests' build (.test-build/, where package.json is a link to the root's) it is the root
 * as well, with the source and the build the checks below compare.
 */
export const REPO_ROOT = `${dirname(realpathSync(fileURLToPath(new URL('../package.json', import.meta.url))))}/`;
/**
 * How the executable is run: from source through tsx, or the build in dist/ (what a deployment runs).
 * Absolute, so it also runs from another directory.
 */
const ENTRY = {
  source: ['--import', import.meta.resolve('tsx'), join(REPO_ROOT, 'src/cli/main.ts')],
  built: [join(REPO_ROOT, 'dist/cli/main.js')],
} as const;
/** `current`: the build when it is at least as new as every source file, else the source. */
export type Entry = keyof typeof ENTRY | 'current';

/** The newest modification time of any file under `dir` (0 when it does not exist). */
function newestFile(dir: string): number {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  return Math.max(
    0,
    ...entries.map((entry) => {
      const path = join(dir, entry.name);
      return entry.isDirectory() ? newestFile(path) : statSync(path).mtimeMs;
    }),
  );
}

/**
 * Whether dist/ was built after the last change under src/. The tests start hundreds of child
 * processes; through tsx each costs about twice the CPU of the build, which made the suite twice as
 * slow. `npm test` builds first, incrementally: tsc writes again only the files whose source changed, so
 * the build stamps dist/.tsbuildinfo each time it succeeds (package.json), and that stamp is what is
 * compared (a source saved unchanged, as `client:generate` does, leaves its output untouched). A stale
 * build is never used: this looks again at each start (a walk of src/, about a millisecond).
 */
export function isBuildCurrent(): boolean {
  return (
    existsSync(ENTRY.built[0]) &&
    modified(join(REPO_ROOT, 'dist/.tsbuildinfo')) >= newestFile(join(REPO_ROOT, 'src'))
  );
}

/** When `path` was last modified, or 0 when it does not exist. */
function modified(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

function entryArgs(entry: Entry): readonly string[] {
  if (entry !== 'current') return ENTRY[entry];
  return isBuildCurrent() ? ENTRY.built : ENTRY.source;
}

export interface ProcessOptions {
  cwd?: string;
  /** The build when it is current (the default), the source, or the build regardless. */
  entry?: Entry;
  /**
   * What happens to stdout: kept in `stdout` (the default); drained, kept only until the process
   * listens (a long run's request log would fill memory); or not even read (with a PORT of its own
   * only: the address is otherwise learnt from the log).
   */
  stdout?: 'keep' | 'drain' | 'ignore';
  /** Node's own options, before the entry (e.g. --trace-gc, or --import of a preload). */
  nodeArgs?: string[];
  /** The process's limit on open file descriptors (`ulimit -n`), when it must be lower than the machine's. */
  openFileLimit?: number;
}

/** Every variable the service reads: a developer's own settings must not leak into a test's child. */
const CONFIG_VARIABLES = describeConfig().map((variable) => variable.name);

/** How long a test waits for a child to do something before it gives up (not a timing assertion). */
export const DEADLINE_MS = 60_000;

/**
 * Polls until `check` returns a value (not undefined), failing after a generous deadline. For waiting on
 * other processes; it never asserts how long anything took.
 */
export async function poll<T>(what: string, check: () => T | undefined | Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const result: NodeJS.ProcessEnv = { ...process.env };
  for (const name of CONFIG_VARIABLES) delete result[name];
  // Started by a test (the runner's context is set): load shedding is off unless the test is about it,
  // so a busy shared machine's event-loop lag is not mistaken for the service's answer (503).
  const testDefaults = result.NODE_TEST_CONTEXT ? { OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0' } : {};
  // The test runner's own context must not make the child think it is a test file.
  delete result.NODE_TEST_CONTEXT;
  result.NO_COLOR = '1';
  return { ...result, ...testDefaults, ...env };
}

const live = new Set<ChildProcess>();

/** Kills every CLI process this module started that is still running (for `after` hooks). */
export function killAllCliProcesses(): void {
  for (const child of live) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  live.clear();
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A CLI process: its output so far, and ways to wait for it. */
export class CliProcess {
  readonly child: ChildProcess;
  stdout = '';
  stderr = '';
  readonly exited: Promise<CliResult>;

  #keepStdout: boolean;

  constructor(
    args: string[],
    env: Record<string, string>,
    {
      cwd = REPO_ROOT,
      entry = 'current',
      stdout = 'keep',
      nodeArgs = [],
      openFileLimit,
    }: ProcessOptions = {},
  ) {
    const command = [process.execPath, ...nodeArgs, ...entryArgs(entry), ...args];
    // The shell sets the limit, then becomes the process (exec): its pid and signals are Node's.
    const limited =
      openFileLimit === undefined
        ? command
        : ['/bin/sh', '-c', `ulimit -n ${openFileLimit} && exec "$@"`, 'sh', ...command];
    this.child = spawn(limited[0] as string, limited.slice(1), {
      cwd,
      env: childEnv(env),
      stdio: ['ignore', stdout === 'ignore' ? 'ignore' : 'pipe', 'pipe'],
    });
    live.add(this.child);
    this.#keepStdout = stdout !== 'ignore';
    this.child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      if (this.#keepStdout) this.stdout += chunk;
    });
    this.child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    this.exited = new Promise((resolve, reject) => {
      this.child.once('error', reject);
      // 'close': the process has exited and its output streams are drained.
      this.child.once('close', (code, signal) => {
        live.delete(this.child);
        resolve({ code, signal, stdout: this.stdout, stderr: this.stderr });
      });
    });
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Polls until `check` returns a value (not undefined), or fails after a deadline. */
  async waitFor<T>(what: string, check: () => T | undefined): Promise<T> {
    const deadline = Date.now() + DEADLINE_MS;
    for (;;) {
      const value = check();
      if (value !== undefined) return value;
      if (!this.running) {
        // One last look: output may have arrived with the exit.
        await this.exited;
        const last = check();
        if (last !== undefined) return last;
        throw new Error(
          `process exited (${this.child.exitCode ?? this.child.signalCode}) before ${what}\n${this.output()}`,
        );
      }
      if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}\n${this.output()}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** Waits for the process to end, failing after a deadline. */
  async exitStatus(): Promise<CliResult> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`process did not exit\n${this.output()}`)),
        DEADLINE_MS,
      ).unref();
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** From now on stdout is read and dropped. */
  dropStdout(): void {
    this.#keepStdout = false;
    this.stdout = '';
  }

  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`; resolves once it has exited. */
  async stop(graceMs = 15_000): Promise<CliResult> {
    if (this.running) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs).unref();
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Ends the process if it still runs (for `after`/finally hooks), and waits for it. */
  async kill(): Promise<void> {
    if (this.running) this.child.kill('SIGKILL');
    await this.exited.catch(() => undefined);
  }

  output(): string {
    return `--- stdout\n${this.stdout}--- stderr\n${this.stderr}`;
  }
}

/** Runs `petstore <args>` to completion. */
export async function runCli(
  args: string[],
  env: Record<string, string> = {},
  options: ProcessOptions = {},
): Promise<CliResult> {
  const cli = new CliProcess(args, env, options);
  try {
    return await cli.exitStatus();
  } finally {
    await cli.kill();
  }
}

/** Parses JSON-lines output; throws on a line that is not JSON. */
export function jsonLines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        throw new Error(`not a JSON line: ${line}`);
      }
    });
}

/** A `petstore serve` process that has said where it listens. */
export interface ServeProcess extends CliProcess {
  /** e.g. http://127.0.0.1:40123 */
  url: string;
}

/**
 * Starts `petstore serve` and waits until it listens. With a PORT of its own in `env` the address is
 * known, and it is ready once GET /healthz answers; otherwise it listens on a free port (PORT=0) and
 * says where: the "Server listening at" entry of its JSON log (so LOG_LEVEL must let info through), or
 * with more than one worker the primary's "N workers listening on" entry.
 */
export async function startServe(
  env: Record<string, string>,
  options: ProcessOptions & { workers?: number; role?: 'all' | 'api' | 'deliver' } = {},
): Promise<ServeProcess> {
  const { workers = 1, role, ...processOptions } = options;
  const port = env.PORT && env.PORT !== '0' ? env.PORT : undefined;
  if (processOptions.stdout === 'ignore' && !port)
    throw new Error("stdout 'ignore' needs a PORT: the address is learnt from the log");
  const args = [
    'serve',
    ...(options.workers ? ['--workers', String(workers)] : []),
    ...(role ? ['--role', role] : []),
  ];
  const cli = new CliProcess(args, { PORT: '0', ...env }, processOptions);
  try {
    let url: string;
    if (port) {
      url = `http://127.0.0.1:${port}`;
      await poll('GET /healthz to answer', async () => {
        if (!cli.running) throw new Error(`process exited before listening\n${cli.output()}`);
        const ok = await fetch(`${url}/healthz`).then(
          (res) => res.ok,
          () => false,
        );
        return ok ? true : undefined;
      });
    } else {
      const entry = workers > 1 ? new RegExp(`^${workers} workers listening on (\\S+)$`) : LISTENING_AT;
      url = await cli.waitFor(`the "${entry.source}" log entry`, () => listeningAt(cli.stdout, entry));
    }
    if (processOptions.stdout === 'drain') cli.dropStdout();
    return Object.assign(cli, { url });
  } catch (error) {
    await cli.kill();
    throw error;
  }
}

const LISTENING_AT = /^Server listening at (\S+)$/;

/**
 * The address in the entry of a JSON log that says where the service listens ("Server listening at …",
 * or the primary's "N workers listening on …"), once it has been written.
 */
function listeningAt(log: string, message: RegExp): string | undefined {
  for (const line of log.split('\n')) {
    if (!line.includes(' listening ')) continue;
    try {
      const entry = JSON.parse(line) as { msg?: unknown };
      const match = typeof entry.msg === 'string' ? message.exec(entry.msg) : null;
      if (match) return match[1];
    } catch {
      // a partial line: the rest is on its way
    }
  }
  return undefined;
}
