import { BetterSqlite3 } from './driver.js';

/** Error codes (and their extended forms) that say "not now", not "never": answered 503. */
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|READONLY|CANTOPEN|NOMEM|PROTOCOL)/;

/** Whether better-sqlite3 threw because the database cannot do the work now (locked, full, failing). */
export function isSqliteUnavailable(error: unknown): boolean {
  if (error instanceof BetterSqlite3.SqliteError) return UNAVAILABLE.test(error.code);
  // Closed under a request that was still running during shutdown.
  return error instanceof TypeError && error.message === 'The database connection is not open';
}
