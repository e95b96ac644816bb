import type pg from 'pg';
import type { ApiKeyRecord, ApiKeyStore } from '../../domain/storage.js';
import { countRows } from './count.js';

interface ApiKeyRow {
  id: string;
  name: string;
  hash: string;
  hint: string;
  created_at: Date;
  revoked_at: Date | null;
}

const toApiKey = (row: ApiKeyRow): ApiKeyRecord => ({
  id: row.id,
  name: row.name,
  hash: row.hash,
  hint: row.hint,
  createdAt: row.created_at,
  revokedAt: row.revoked_at ?? undefined,
});

const API_KEY_COLUMNS = 'id, name, hash, hint, created_at, revoked_at';

/** API keys on PostgreSQL; instants as timestamptz. */
export class PostgresApiKeyStore implements ApiKeyStore {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async insert(key: ApiKeyRecord): Promise<void> {
    await this.#pool.query(`INSERT INTO api_keys (${API_KEY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)`, [
      key.id,
      key.name,
      key.hash,
      key.hint,
      key.createdAt,
      key.revokedAt ?? null,
    ]);
  }

  async importBatch(keys: readonly ApiKeyRecord[]): Promise<number> {
    const { rowCount } = await this.#pool.query(
      `INSERT INTO api_keys (${API_KEY_COLUMNS})
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[])
       ON CONFLICT (id) DO UPDATE SET revoked_at = excluded.revoked_at
       WHERE api_keys.revoked_at IS NULL AND excluded.revoked_at IS NOT NULL`,
      [
        keys.map((k) => k.id),
        keys.map((k) => k.name),
        keys.map((k) => k.hash),
        keys.map((k) => k.hint),
        keys.map((k) => k.createdAt),
        keys.map((k) => k.revokedAt ?? null),
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
