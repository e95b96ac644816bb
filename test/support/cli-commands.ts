// What the tests of the petstore commands (test/cli/<command>.test.ts) share: the key format, the
// version, fresh databases, keys made and listed through the commands themselves.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { TestContext } from 'node:test';
import { BetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import { migratedTempDatabase, runInProcess, type TempDatabase, tempDatabase } from './cli.js';

/** A key as `keys create` and the first start print it: the prefix and 32 random bytes, base64url. */
export const KEY = /^pst_[A-Za-z0-9_-]{43}$/;

/** The version package.json gives, which the executable reports. */
export const PACKAGE_VERSION: string = JSON.parse(
  readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
).version;

export interface ListedKey {
  id: string;
  name: string;
  key: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  revokedAt: string | null;
  status: 'active' | 'expired' | 'revoked';
}

/** A database file for this test that does not exist yet, removed when it ends. */
export function newDatabase(t: TestContext): TempDatabase {
  const db = tempDatabase();
  t.after(() => db.remove());
  return db;
}

/** A fresh database for this test, its schema in place (as `migrate` leaves it), removed when it ends. */
export async function database(t: TestContext): Promise<TempDatabase> {
  const db = await migratedTempDatabase();
  t.after(() => db.remove());
  return db;
}

export async function createKey(db: TempDatabase, name: string): Promise<string> {
  const result = await runInProcess(['keys', 'create', '--name', name], { DATABASE_URL: db.url });
  assert.equal(result.code, 0, result.stderr);
  const secret = result.stdout.trim();
  assert.match(secret, KEY);
  return secret;
}

export async function listKeys(db: TempDatabase): Promise<ListedKey[]> {
  const result = await runInProcess(['keys', 'list', '--json'], { DATABASE_URL: db.url });
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout) as ListedKey[];
}

export function integrityCheck(db: TempDatabase): unknown {
  const sqlite = new BetterSqlite3(db.path, { readonly: true, fileMustExist: true });
  try {
    return sqlite.pragma('integrity_check', { simple: true });
  } finally {
    sqlite.close();
  }
}
