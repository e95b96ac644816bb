import type pg from 'pg';
import { isApiKeyScope } from '../../domain/api-keys.js';
import type { ApiKeyRecord, ApiKeyStore, ApiKeyUse } from '../../domain/storage.js';
import { countRows } from './count.js';

interface ApiKeyRow {
  id: string;
  name: string;
  hash: string;
  hint: string;
  scopes: string[];
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

const toApiKey = (row: ApiKeyRow): ApiKeyRecord => ({
  id: row.id,
  name: row.name,
  hash: row.hash,
  hint: row.hint,
  scopes: row.scopes.filter(isApiKeyScope),
  createdAt: row.created_at,
  expiresAt: row.expires_at ?? undefined,
  revokedAt: row.revoked_at ?? undefined,
  lastUsedAt: row.last_used_at ?? undefined,
});

const API_KEY_COLUMNS = 'id, name, hash, hint, scopes, created_at, expires_at, revoked_at, last_used_at';

/** API keys on PostgreSQL; instants as timestamptz, scopes as text[]. */
export class PostgresApiKeyStore implements ApiKeyStore {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async insert(key: ApiKeyRecord): Promise<void> {
    await this.#pool.query(
      `INSERT INTO api_keys (${API_KEY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [
        key.id,
        key.name,
        key.hash,
        key.hint,
        key.scopes,
        key.createdAt,
        key.expiresAt ?? null,
        key.revokedAt ?? null,
        key.lastUsedAt ?? null,
      ],
    );
  }

  async importBatch(keys: readonly ApiKeyRecord[]): Promise<number> {
    // Scopes travel as one space-separated text per key: unnest cannot take an array of arrays of
    // different lengths.
    const { rowCount } = await this.#pool.query(
      `INSERT INTO api_keys (${API_KEY_COLUMNS})
       SELECT id, name, hash, hint, string_to_array(scopes, ' '), created_at, expires_at, revoked_at, last_used_at
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[],
                   $7::timestamptz[], $8::timestamptz[], $9::timestamptz[])
         AS k (id, name, hash, hint, scopes, created_at, expires_at, revoked_at, last_used_at)
       ON CONFLICT (id) DO UPDATE SET revoked_at = excluded.revoked_at
       WHERE api_keys.revoked_at IS NULL AND excluded.revoked_at IS NOT NULL`,
      [
        keys.map((k) => k.id),
        keys.map((k) => k.name),
        keys.map((k) => k.hash),
        keys.map((k) => k.hint),
        keys.map((k) => k.scopes.join(' ')),
        keys.map((k) => k.createdAt),
        keys.map((k) => k.expiresAt ?? null),
        keys.map((k) => k.revokedAt ?? null),
        keys.map((k) => k.lastUsedAt ?? null),
      ],
    );
    return rowCount ?? 0;
  }

  async findActiveByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const { rows } = await this.#pool.query<ApiKeyRow>({
      name: 'active_api_key_by_hash',
      text: `SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE hash = $1 AND revoked_at IS NULL`,
      values: [hash],
    });
    return rows[0] && toApiKey(rows[0]);
  }

  async recordLastUse(uses: readonly ApiKeyUse[]): Promise<void> {
    await this.#pool.query(
      `UPDATE api_keys AS k SET last_used_at = u.at
       FROM unnest($1::text[], $2::timestamptz[]) AS u (hash, at)
       WHERE k.hash = u.hash AND (k.last_used_at IS NULL OR k.last_used_at < u.at)`,
      [uses.map((use) => use.hash), uses.map((use) => use.at)],
    );
  }

  async list(): Promise<ApiKeyRecord[]> {
    const { rows } = await this.#pool.query<ApiKeyRow>(
      `SELECT ${API_KEY_COLUMNS} FROM api_keys ORDER BY created_at, id`,
    );
    return rows.map(toApiKey);
  }

  async revoke(id: string, at: Date): Promise<boolean> {
    const result = await this.#pool.query(
      'UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL',
      [at, id],
    );
    return (result.rowCount ?? 0) > 0;
  }

  async count(): Promise<number> {
    return countRows(this.#pool, 'api_keys');
  }
}
