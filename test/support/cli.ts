import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../src/cli/run.js';
import { describeConfig } from '../../src/config/config.js';
import { openStorage } from '../../src/storage/open-storage.js';
import { type CliResult, jsonLines, poll, type ServeProcess } from '../../support/service-process.js';

export {
  CliProcess,
  type CliResult,
  jsonLines,
  killAllCliProcesses,
  poll,
  REPO_ROOT,
  runCli,
  type ServeProcess,
  startServe,
} from '../../support/service-process.js';

/** Every variable the service reads: a developer's own settings must not reach a command a test runs. */
const CONFIG_VARIABLES = new Set(describeConfig().map((variable) => variable.name));

/**
 * Runs `petstore <args>` in this process, as its `main` would in a process of its own: the same parsing,
 * output and exit status, with `env` (over this process's environment, less any of the service's
 * variables) as its environment. For what is about parsing, output and exit codes; what is about the
 * process itself (signals, workers, crashes, the first start) runs the executable (`runCli`).
 */
export async function runInProcess(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const own = Object.fromEntries(Object.entries(process.env).filter(([name]) => !CONFIG_VARIABLES.has(name)));
  let stdout = '';
  let stderr = '';
  const code = await run(args, {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: { ...own, NO_COLOR: '1', ...env },
  });
  return { code, signal: null, stdout, stderr };
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

/**
 * A temporary SQLite database with its schema in place, as `petstore migrate` leaves it: the commands
 * other than `serve` and `migrate` refuse a database file that does not exist.
 */
export async function migratedTempDatabase(): Promise<TempDatabase> {
  const db = tempDatabase();
  const storage = await openStorage({ databaseUrl: db.url, databasePoolSize: 1, databaseTimeoutMs: 5_000 });
  await storage.close();
  return db;
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

/**
 * Whether a fetch failed because the process it talked to is gone: the connection refused or cut
 * (`fetch failed`), or the body cut off mid-way (`terminated`). Any other error is a test failure.
 */
export function lostConnection(error: unknown): boolean {
  return error instanceof TypeError && (error.message === 'fetch failed' || error.message === 'terminated');
}

/**
 * The pids of the workers of `serve --workers 2`, once both have logged where they listen. Each worker
 * logs it (written asynchronously) and then tells the primary, which says so: the workers' lines can
 * reach stdout a moment after the primary's.
 */
export const workerPids = (serve: ServeProcess): Promise<number[]> =>
  poll('both workers to log where they listen', () => {
    const pids = jsonLines(serve.stdout)
      .filter((line) => String(line.msg).startsWith('Server listening at'))
      .map((line) => line.pid as number);
    return pids.length >= 2 ? pids : undefined;
  });
