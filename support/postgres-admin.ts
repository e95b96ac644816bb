/**
 * PostgreSQL administration for the tests, the benchmark and the soak: throwaway schemas and databases
 * on a server where the user may create them (the tests' trust-auth 127.0.0.1:5432 by default).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** A schema or database made for one run: its DATABASE_URL, and how to remove it with all it holds. */
export interface ThrowawayDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * How long a connection may take before it is given up: a bound on a hang, not on the server's speed.
 * At 5 s it expired on a machine loaded by a whole test run (issue 38); a refused connection (no server)
 * fails at once whatever it is.
 */
const CONNECT_TIMEOUT_MS = 30_000;

/** Runs one statement on its own connection. Names passed in SQL here are ours, never user input. */
export async function adminQuery(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

const uniqueName = (prefix: string) => `${prefix}_${randomBytes(8).toString('hex')}`;

/**
 * A new schema on the server `url` names, selected through the URL's search_path option: cheap enough
 * for one per test.
 */
export async function createSchema(url: string, prefix: string): Promise<ThrowawayDatabase> {
  const schema = uniqueName(prefix);
  await adminQuery(url, `CREATE SCHEMA ${schema}`);
  const scoped = new URL(url);
  scoped.search = `options=${encodeURIComponent(`-c search_path=${schema}`)}`;
  return { url: scoped.href, drop: () => adminQuery(url, `DROP SCHEMA ${schema} CASCADE`) };
}

/** A new database on the server `url` names: for a run that measures, away from anything else. */
export async function createDatabase(url: string, prefix: string): Promise<ThrowawayDatabase> {
  const name = uniqueName(prefix);
  await adminQuery(url, `CREATE DATABASE ${name}`);
  const own = new URL(url);
  own.pathname = `/${name}`;
  return { url: own.href, drop: () => adminQuery(url, `DROP DATABASE ${name} WITH (FORCE)`) };
}
