import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { loadConfig } from '../../src/config/config.js';
import { openStorage } from '../../src/storage/open-storage.js';
import type { Storage } from '../../src/storage/storage.js';

/** A database for one test: its URL, and a way to throw it away afterwards. */
export interface TestDatabase {
  url: string;
  open(): Promise<Storage>;
  drop(): Promise<void>;
}

export interface Backend {
  name: string;
  /** A fresh, empty database that no other test sees. */
  create(): Promise<TestDatabase>;
}

const openUrl = (url: string) => openStorage(loadConfig({ DATABASE_URL: url }));

export const sqlite: Backend = {
  name: 'sqlite',
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-test-'));
    const url = `sqlite:${join(dir, 'petstore.db')}`;
    return {
      url,
      open: () => openUrl(url),
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  },
};

/** The PostgreSQL server the tests use; its user must be allowed to create schemas. */
export const POSTGRES_TEST_URL =
  process.env.PETSTORE_TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/test';

/** CI must run the PostgreSQL half: there an unreachable server fails the tests instead of leaving them out. */
const ON_CI = !['', '0', 'false'].includes((process.env.CI ?? '').toLowerCase());

async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_TEST_URL, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Why PostgreSQL cannot be used, or undefined when it answers. */
async function postgresProblem(): Promise<string | undefined> {
  try {
    await adminQuery('SELECT 1');
    return undefined;
  } catch (error) {
    const url = new URL(POSTGRES_TEST_URL);
    if (url.password) url.password = '***';
    return `cannot reach ${url.href}: ${(error as Error).message || (error as { code?: string }).code}`;
  }
}

/** Undefined when the PostgreSQL half can run; otherwise what stopped it. */
export const POSTGRES_UNAVAILABLE = await postgresProblem();

/** Printed when the PostgreSQL half is left out, so a green run on SQLite alone is not mistaken for more. */
export const POSTGRES_NOT_RUN_NOTICE = `
*** The PostgreSQL half of the tests was NOT run; only SQLite was tested.
*** ${POSTGRES_UNAVAILABLE}
*** To run it, start PostgreSQL (e.g. \`pg_ctlcluster <version> main start\`), or point the tests at a
*** server where the user may create schemas: PETSTORE_TEST_POSTGRES_URL=postgres://user@host:5432/db
*** On CI (CI=true) an unreachable PostgreSQL fails the run instead.
`;

/** Each test gets its own schema on the test server, selected through the URL's search_path option. */
export const postgres: Backend = {
  name: 'postgres',
  async create() {
    if (POSTGRES_UNAVAILABLE)
      throw new Error(`PostgreSQL is required here (CI=true) but ${POSTGRES_UNAVAILABLE}`);
    const schema = `petstore_test_${randomBytes(8).toString('hex')}`;
    await adminQuery(`CREATE SCHEMA ${schema}`);
    const url = new URL(POSTGRES_TEST_URL);
    url.search = `options=${encodeURIComponent(`-c search_path=${schema}`)}`;
    return {
      url: url.href,
      open: () => openUrl(url.href),
      drop: () => adminQuery(`DROP SCHEMA ${schema} CASCADE`),
    };
  },
};

/** Every backend the suites run against: PostgreSQL too unless it is unreachable off CI. */
export const backends: Backend[] = POSTGRES_UNAVAILABLE && !ON_CI ? [sqlite] : [sqlite, postgres];
