import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeConfig } from '../../src/config/config.js';

/** The repository root: the CLI runs from here by default, as `node --import tsx src/cli/main.ts …`. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
// Absolute, so that the CLI can also run from another working directory.
const CLI_ARGS = ['--import', import.meta.resolve('tsx'), join(REPO_ROOT, 'src/cli/main.ts')];

/** Every variable the service reads: a developer's own settings must not leak into a test's child. */
const CONFIG_VARIABLES = describeConfig().map((variable) => variable.name);

/** How long a test waits for a child to do something before it gives up (not a timing assertion). */
const DEADLINE_MS = 60_000;

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

/** A temporary SQLite database file for one test. */
export interface TempDatabase {
  dir: string;
  path: string;
  /** DATABASE_URL for it: sqlite:<dir>/p.db */
  url: string;
  remove(): void;
}

export function tempDatabase(): TempDatabase {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-cli-'));
  const path = join(dir, 'p.db');
  return { dir, path, url: `sqlite:${path}`, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const result: NodeJS.ProcessEnv = { ...process.env };
  for (const name of CONFIG_VARIABLES) delete result[name];
  // The test runner's own context must not make the child think it is a test file.
  delete result.NODE_TEST_CONTEXT;
  result.NO_COLOR = '1';
  return { ...result, ...env };
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

  constructor(args: string[], env: Record<string, string>, { cwd = REPO_ROOT }: { cwd?: string } = {}) {
    this.child = spawn(process.execPath, [...CLI_ARGS, ...args], {
      cwd,
      env: childEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    live.add(this.child);
    this.child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      this.stdout += chunk;
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
export async function runCli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const cli = new CliProcess(args, env);
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
 * Starts `petstore serve` (on a free port unless env sets PORT) and waits until it listens: its
 * "Server listening at" log line, or with `workers` the primary's "N workers listening on" line.
 */
export async function startServe(
  env: Record<string, string>,
  options: { cwd?: string; workers?: number } = {},
): Promise<ServeProcess> {
  const args = options.workers ? ['serve', '--workers', String(options.workers)] : ['serve'];
  const cli = new CliProcess(args, { PORT: '0', ...env }, options);
  try {
    const url = options.workers
      ? await cli.waitFor('the primary to say its workers listen', () => {
          const match = new RegExp(`petstore: ${options.workers} workers listening on (http://\\S+)`).exec(
            cli.stderr,
          );
          return match?.[1];
        })
      : await cli.waitFor('the "Server listening at" log line', () => {
          const match = /"msg":"Server listening at (http:\/\/127\.0\.0\.1:\d+)"/.exec(cli.stdout);
          return match?.[1];
        });
    return Object.assign(cli, { url });
  } catch (error) {
    await cli.kill();
    throw error;
  }
}

/** Asserts a failed run: non-zero exit, nothing on stdout, exactly one line on stderr; returns the line. */
export function oneLineFailure(result: CliResult): string {
  assert.notEqual(result.code, 0, `exit code ${result.code}`);
  assert.notEqual(result.code, null, `killed by ${result.signal}`);
  assert.equal(result.stdout, '');
  const lines = result.stderr.split('\n').filter((line) => line !== '');
  assert.equal(lines.length, 1, `stderr is not one line:\n${result.stderr}`);
  return lines[0] as string;
}
