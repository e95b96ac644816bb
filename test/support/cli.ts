import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
