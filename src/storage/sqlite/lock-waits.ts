import { setTimeout as sleep } from 'node:timers/promises';
import { wrapMethods } from '../intercept-errors.js';
import { BetterSqlite3 } from './driver.js';

/**
 * The first pause before trying again for a lock another process holds, doubled on each try up to
 * LOCK_RETRY_MAX_MS. The first tries are quick because most locks (another process's group commit)
 * are held for a millisecond or two; the cap keeps a long wait from costing more than a try per 50 ms.
 */
const LOCK_RETRY_FIRST_MS = 2;
const LOCK_RETRY_MAX_MS = 50;

function isBusy(error: unknown): boolean {
  return error instanceof BetterSqlite3.SqliteError && error.code.startsWith('SQLITE_BUSY');
}

/**
 * `work()`, tried again after a pause while SQLite answers that another process holds the lock
 * (SQLITE_BUSY), until `timeoutMs` have passed; then the busy error is thrown (503). SQLite's own busy
 * handler would wait inside the call instead, on the event loop's thread: one write blocked every
 * request of the process, /healthz included, for up to DATABASE_TIMEOUT_MS. The connection's
 * busy_timeout is 0, so a call that meets the lock returns at once and the wait happens here.
 */
export async function retryWhileLocked<T>(work: () => T | Promise<T>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let pause = LOCK_RETRY_FIRST_MS;
  for (;;) {
    try {
      return await work();
    } catch (error) {
      const left = deadline - Date.now();
      if (!isBusy(error) || left <= 0) throw error;
      await sleep(Math.min(pause, left));
      pause = Math.min(pause * 2, LOCK_RETRY_MAX_MS);
    }
  }
}

/**
 * The same store, every method of which waits for a lock another process holds with retryWhileLocked.
 * A method that returns without meeting the lock (the usual case) costs no promise more than before.
 */
export function waitingForLocks<T extends object>(target: T, timeoutMs: number): T {
  return wrapMethods(target, (call) => (...args) => {
    const retry = (error: unknown) =>
      isBusy(error) ? retryWhileLocked(() => call(args), timeoutMs) : Promise.reject(error);
    let result: unknown;
    try {
      result = call(args);
    } catch (error) {
      if (!isBusy(error)) throw error;
      return retry(error);
    }
    return result instanceof Promise ? result.catch(retry) : result;
  });
}
