/** SQLSTATE classes and codes that say "not now", not "never": answered 503. */
const UNAVAILABLE_SQLSTATE = /^(08|53|57|58)|^(55P03|25006|40001|40P01)$/; // connection, resources, operator, system; lock wait, read-only, serialization, deadlock
/** node-postgres's own errors for a connection that broke or never came: they carry no SQLSTATE. */
const UNAVAILABLE_CLIENT =
  /^(Connection terminated|Query read timeout|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed|Cannot use a pool after calling end)/;
const UNAVAILABLE_SOCKET = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

/** Whether node-postgres failed because the database cannot do the work now (down, stalled, full, busy). */
export function isPostgresUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') return UNAVAILABLE_SQLSTATE.test(code) || UNAVAILABLE_SOCKET.has(code);
  return UNAVAILABLE_CLIENT.test(error.message);
}

/** Whether the connection itself is gone or stuck, so a ROLLBACK on it would only wait in vain. */
export function isConnectionLost(error: unknown): boolean {
  return (
    error instanceof Error && (error as { code?: unknown }).code === undefined && isPostgresUnavailable(error)
  );
}
