import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { HookFn, HookOptions, TestFn, TestOptions } from 'node:test';
import * as nodeTest from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import type { Storage } from '../../src/domain/storage.js';
import { openStorage } from '../../src/storage/open-storage.js';
import { adminQuery, createSchema } from '../../support/postgres-admin.js';

/** A database for one test: its URL, and a way to throw it away afterwards. */
export interface TestDatabase {
  url: string;
  open(): Promise<Storage>;
  drop(): Promise<void>;
}

export interface Backend {
  name: string;
  /** Why this backend's tests cannot run here (they are reported as skipped), or undefined. */
  unavailable: string | undefined;
  /** A fresh, empty database that no other test sees. */
  create(): Promise<TestDatabase>;
  /**
   * `describe` for a suite run on this backend. Where the backend cannot run, the suite is still
   * declared, with each test in it reported as skipped and the reason, and its hooks not run: so the
   * totals tell how many tests did not run. Its tests and hooks must come from this module.
   */
  describe(name: string, fn: () => void): void;
}

/** While the suite of a backend that cannot run is being declared: the reason its tests are skipped. */
let skipping: string | undefined;

function describeOn(this: Backend, name: string, fn: () => void): void {
  const reason = this.unavailable;
  nodeTest.describe(name, () => {
    skipping = reason;
    try {
      fn(); // node:test declares a suite's tests synchronously, so `skipping` covers exactly this one
    } finally {
      skipping = undefined;
    }
  });
}

/** node:test's `test`, reported as skipped (with the reason) inside a suite of a backend that cannot run. */
export function test(name: string, fn: TestFn): Promise<void>;
export function test(name: string, options: TestOptions, fn: TestFn): Promise<void>;
export function test(name: string, optionsOrFn: TestOptions | TestFn, fn?: TestFn): Promise<void> {
  if (skipping !== undefined) return nodeTest.test(name, { skip: skipping });
  return typeof optionsOrFn === 'function'
    ? nodeTest.test(name, optionsOrFn)
    : nodeTest.test(name, optionsOrFn, fn);
}

/** A hook that is not run inside a suite of a backend that cannot run (it would open its database). */
const skippable =
  (register: (fn: HookFn, options?: HookOptions) => void) =>
  (fn: HookFn, options?: HookOptions): void => {
    if (skipping === undefined) register(fn, options);
  };
export const before = skippable(nodeTest.before);
export const after = skippable(nodeTest.after);
export const beforeEach = skippable(nodeTest.beforeEach);
export const afterEach = skippable(nodeTest.afterEach);
export const { describe } = nodeTest;

const openUrl = (url: string) => openStorage(loadConfig({ DATABASE_URL: url }));

export const sqlite: Backend = {
  name: 'sqlite',
  unavailable: undefined,
  describe: describeOn,
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

/** Why PostgreSQL cannot be used, or undefined when it answers. */
async function postgresProblem(): Promise<string | undefined> {
  try {
    await adminQuery(POSTGRES_TEST_URL, 'SELECT 1');
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
*** The PostgreSQL half of the tests was NOT run (each of its tests is reported as skipped); only SQLite was tested.
*** ${POSTGRES_UNAVAILABLE}
*** To run it, start PostgreSQL (e.g. \`pg_ctlcluster <version> main start\`), or point the tests at a
*** server where the user may create schemas: PETSTORE_TEST_POSTGRES_URL=postgres://user@host:5432/db
*** On CI (CI=true) an unreachable PostgreSQL fails the run instead.
`;

/**
 * Each test gets its own schema on the test server, selected through the URL's search_path option.
 * Unreachable off CI, its tests are reported as skipped; on CI they run, and fail.
 */
export const postgres: Backend = {
  name: 'postgres',
  unavailable: POSTGRES_UNAVAILABLE && !ON_CI ? `PostgreSQL was not run: ${POSTGRES_UNAVAILABLE}` : undefined,
  describe: describeOn,
  async create() {
    if (POSTGRES_UNAVAILABLE)
      throw new Error(`PostgreSQL is required here (CI=true) but ${POSTGRES_UNAVAILABLE}`);
    const { url, drop } = await createSchema(POSTGRES_TEST_URL, 'petstore_test');
    return { url, open: () => openUrl(url), drop };
  },
};

/** Every backend the suites run against (PostgreSQL's reported as skipped when it is unreachable off CI). */
export const backends: Backend[] = [sqlite, postgres];

/**
 * The backends of the suites about the HTTP layer alone (validation, hostile input, coded bodies,
 * routing errors, scopes, conditional requests, properties, the OpenAPI document, request ids, unread
 * bodies, slow clients, rate limits and failed authentications per address): SQLite, since that layer
 * is the same whatever stores the rows. What of them reaches the database runs on PostgreSQL too: test/http/smoke.test.ts
 * (every operation once, a 304, a 403, a 400), and in their own files the parts that store or fail in the
 * database (hostile names, the database gone). `PETSTORE_TEST_HTTP_BACKENDS=all` runs them on every backend.
 */
export const httpLayerBackends: Backend[] =
  process.env.PETSTORE_TEST_HTTP_BACKENDS === 'all' ? backends : [sqlite];

/**
 * Clean-ups that run last-registered first once the test ends (node:test runs `t.after` hooks in the
 * order they were added): a database registered first goes after the servers on it, since dropping
 * one under a running server (its deliverer querying) can deadlock.
 */
export function cleanUpInReverse(t: { after(fn: () => unknown): void }): (step: () => unknown) => void {
  const steps: (() => unknown)[] = [];
  t.after(async () => {
    for (const step of steps.reverse()) await step();
  });
  return (step) => {
    steps.push(step);
  };
}
