import type Database from 'better-sqlite3';
import type { ApiKeyRecord, ApiKeyStore } from '../../domain/storage.js';

interface ApiKeyRow {
  id: string;
  name: string;
  hash: string;
  hint: string;
  created_at: string;
  revoked_at: string | null;
}

const toApiKey = (row: ApiKeyRow): ApiKeyRecord => ({
  id: row.id,
  name: row.name,
  hash: row.hash,
  hint: row.hint,
  createdAt: new Date(row.created_at),
  revokedAt: row.revoked_at === null ? undefined : new Date(row.revoked_at),
});

const toApiKeyRow = (key: ApiKeyRecord): ApiKeyRow => ({
  id: key.id,
  name: key.name,
  hash: key.hash,
  hint: key.hint,
  created_at: key.createdAt.toISOString(),
  revoked_at: key.revokedAt?.toISOString() ?? null,
});

const INSERT_API_KEY = `INSERT INTO api_keys (id, name, hash, hint, created_at, revoked_at)
  VALUES (@id, @name, @hash, @hint, @created_at, @revoked_at)`;

/** API keys on SQLite; instants as ISO 8601 text. */
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
