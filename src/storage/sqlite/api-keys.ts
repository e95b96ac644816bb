import type Database from 'better-sqlite3';
import { type ApiKeyScope, isApiKeyScope } from '../../domain/api-keys.js';
import type { ApiKeyRecord, ApiKeyStore, ApiKeyUse } from '../../domain/storage.js';

interface ApiKeyRow {
  id: string;
  name: string;
  hash: string;
  hint: string;
  /** Space-separated (RFC 6749 §3.3). */
  scopes: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
}

const instant = (text: string | null) => (text === null ? undefined : new Date(text));

/**
 * Scope lists as stored, parsed once each: a key is read on every request here (found keys are not
 * cached on SQLite), and there are at most 16 different lists. Each record gets its own copy.
 */
const parsedScopes = new Map<string, readonly ApiKeyScope[]>();
function scopesOf(text: string): ApiKeyScope[] {
  let scopes = parsedScopes.get(text);
  if (scopes === undefined) {
    scopes = text.split(' ').filter(isApiKeyScope);
    if (parsedScopes.size < 64) parsedScopes.set(text, scopes);
  }
  return [...scopes];
}

const toApiKey = (row: ApiKeyRow): ApiKeyRecord => ({
  id: row.id,
  name: row.name,
  hash: row.hash,
  hint: row.hint,
  scopes: scopesOf(row.scopes),
  createdAt: new Date(row.created_at),
  expiresAt: instant(row.expires_at),
  revokedAt: instant(row.revoked_at),
  lastUsedAt: instant(row.last_used_at),
});

const toApiKeyRow = (key: ApiKeyRecord): ApiKeyRow => ({
  id: key.id,
  name: key.name,
  hash: key.hash,
  hint: key.hint,
  scopes: key.scopes.join(' '),
  created_at: key.createdAt.toISOString(),
  expires_at: key.expiresAt?.toISOString() ?? null,
  revoked_at: key.revokedAt?.toISOString() ?? null,
  last_used_at: key.lastUsedAt?.toISOString() ?? null,
});

const INSERT_API_KEY = `INSERT INTO api_keys (id, name, hash, hint, scopes, created_at, expires_at, revoked_at, last_used_at)
  VALUES (@id, @name, @hash, @hint, @scopes, @created_at, @expires_at, @revoked_at, @last_used_at)`;

/** API keys on SQLite; instants as ISO 8601 text (which sorts as the instants do). */
export class SqliteApiKeyStore implements ApiKeyStore {
  readonly #db: Database.Database;
  readonly #byHash: Database.Statement<[string], ApiKeyRow>;

  constructor(db: Database.Database) {
    this.#db = db;
    this.#byHash = db.prepare<[string], ApiKeyRow>(
      'SELECT * FROM api_keys WHERE hash = ? AND revoked_at IS NULL',
    );
  }

  async insert(key: ApiKeyRecord): Promise<void> {
    this.#db.prepare(INSERT_API_KEY).run(toApiKeyRow(key));
  }

  async importBatch(keys: readonly ApiKeyRecord[]): Promise<number> {
    const upsert = this.#db.prepare<[ApiKeyRow]>(
      `${INSERT_API_KEY} ON CONFLICT (id) DO UPDATE SET revoked_at = excluded.revoked_at
       WHERE api_keys.revoked_at IS NULL AND excluded.revoked_at IS NOT NULL`,
    );
    return this.#db.transaction(() =>
      keys.reduce((written, key) => written + upsert.run(toApiKeyRow(key)).changes, 0),
    )();
  }

  async findActiveByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const row = this.#byHash.get(hash);
    return row && toApiKey(row);
  }

  async recordLastUse(uses: readonly ApiKeyUse[]): Promise<void> {
    const update = this.#db.prepare<[{ at: string; hash: string }]>(
      'UPDATE api_keys SET last_used_at = @at WHERE hash = @hash AND (last_used_at IS NULL OR last_used_at < @at)',
    );
    this.#db.transaction(() => {
      for (const { hash, at } of uses) update.run({ at: at.toISOString(), hash });
    })();
  }

  async list(): Promise<ApiKeyRecord[]> {
    const rows = this.#db.prepare<[], ApiKeyRow>('SELECT * FROM api_keys ORDER BY created_at, id').all();
    return rows.map(toApiKey);
  }

  async revoke(id: string, at: Date): Promise<boolean> {
    const result = this.#db
      .prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL')
      .run(at.toISOString(), id);
    return result.changes > 0;
  }

  async count(): Promise<number> {
    return this.#db.prepare<[], number>('SELECT count(*) FROM api_keys').pluck().get() as number;
  }
}
