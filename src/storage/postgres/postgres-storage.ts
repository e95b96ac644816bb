import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Pet } from '../../domain/pet.js';
import type {
  ApiKeyRecord,
  ApiKeyStore,
  IdempotencyStore,
  PetListQuery,
  PetRecordInput,
  PetStore,
  PoolStats,
  SchemaVersions,
  Storage,
} from '../../domain/storage.js';
import { CreateBatcher } from '../create-batcher.js';
import { type PetRow, toPet } from '../pet-row.js';
import { toStorageError, translateUnavailable } from '../unavailable.js';
import { isPostgresUnavailable } from './errors.js';
import { migrate } from './migrations.js';
import { PostgresIdempotencyStore } from './postgres-idempotency-store.js';
import { inTransaction } from './transaction.js';

export interface PostgresOptions {
  /** Connections this process may hold (DATABASE_POOL_SIZE). */
  poolSize: number;
  /** Longest wait for a connection, a statement or a lock (DATABASE_TIMEOUT_MS). */
  timeoutMs: number;
}

/**
 * int8 columns (ids, categoryId, count(*)) parsed to bigint. node-postgres returns them as strings by
 * default, and Number() would round anything beyond 2^53; this stays exact. Scoped to our pool rather
 * than set on pg.types, so no other code in the process is affected.
 */
const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8 && format !== 'binary'
      ? BigInt
      : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};

/**
 * How much longer than DATABASE_TIMEOUT_MS the client waits for an answer. PostgreSQL itself cancels a
 * statement or a lock wait at the bound (statement_timeout, lock_timeout) and says so; this is for when
 * it cannot say anything (a stalled network, a frozen server), and the connection is then thrown away.
 */
const CLIENT_MARGIN_MS = 1_000;

/** The readiness probe's own bound: /readyz answers within a second. */
const PROBE_TIMEOUT_MS = 900;

/** The pool every PostgresStorage uses (the benchmark's bare-query figure uses it too). */
export function newPool(url: string, { poolSize, timeoutMs }: PostgresOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    // How an operator tells the service's connections apart in pg_stat_activity (the URL may override).
    application_name: 'petstore',
    max: poolSize,
    // Waiting for a free connection, or for the server to accept one, ends here.
    connectionTimeoutMillis: timeoutMs,
    statement_timeout: timeoutMs,
    lock_timeout: timeoutMs,
    // A transaction left open by a client that vanished must not hold its locks for long.
    idle_in_transaction_session_timeout: timeoutMs * 2,
    query_timeout: timeoutMs + CLIENT_MARGIN_MS,
    // A peer that vanished without a FIN or RST is found by the kernel, not only by a query timing out.
    keepAlive: true,
    types,
  });
  // An idle connection that breaks (a server restart, a network cut) is dropped by the pool and
  // replaced on next use; without a listener the 'error' event would crash the process.
  pool.on('error', () => undefined);
  return pool;
}

/**
 * For several nodes on one database. A pet's 201 is durable once COMMIT returns: PostgreSQL's default
 * synchronous_commit=on flushes the write-ahead log first (keep it on).
 */
export class PostgresStorage implements Storage {
  readonly pets: PetStore & { settled(): Promise<void> };
  readonly apiKeys: ApiKeyStore;
  readonly idempotency: IdempotencyStore;
  readonly schema: SchemaVersions;
  readonly #pool: pg.Pool;

  private constructor(pool: pg.Pool, schema: SchemaVersions) {
    this.#pool = pool;
    this.schema = schema;
    this.pets = translateUnavailable(new PostgresPetStore(pool), isPostgresUnavailable);
    this.apiKeys = translateUnavailable(new PostgresApiKeyStore(pool), isPostgresUnavailable);
    this.idempotency = translateUnavailable(new PostgresIdempotencyStore(pool), isPostgresUnavailable);
  }

  /** Connects and applies pending migrations; rejects when the database cannot be reached. */
  static async open(url: string, options: PostgresOptions): Promise<PostgresStorage> {
    // Migrations on a connection of their own, without the statement bound: building an index on a
    // large table may take longer than any request should. Connecting is still bounded.
    const migrations = new pg.Pool({
      connectionString: url,
      max: 1,
      connectionTimeoutMillis: options.timeoutMs,
      types,
    });
    let schema: SchemaVersions;
    try {
      schema = await migrate(migrations);
    } finally {
      await migrations.end();
    }
    return new PostgresStorage(newPool(url, options), schema);
  }

  async sharedSecret(name: string): Promise<Buffer> {
    // Insert-if-absent then read: when nodes race, the first commit wins and every node reads its value.
    await this.#pool.query(
      'INSERT INTO shared_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING',
      [name, randomBytes(32)],
    );
    const { rows } = await this.#pool.query<{ value: Buffer }>(
      'SELECT value FROM shared_secrets WHERE name = $1',
      [name],
    );
    return (rows[0] as { value: Buffer }).value;
  }

  poolStats(): PoolStats {
    return { total: this.#pool.totalCount, idle: this.#pool.idleCount, waiting: this.#pool.waitingCount };
  }

  /** A real write, committed: a database that answers but cannot write (full, read-only) fails. */
  async ping(): Promise<void> {
    try {
      await this.#pool.query({
        text: `INSERT INTO readiness_probe (id, checked_at) VALUES (1, now())
               ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at`,
        query_timeout: PROBE_TIMEOUT_MS,
      } as pg.QueryConfig);
    } catch (error) {
      throw toStorageError(error, isPostgresUnavailable);
    }
  }

  async analyze(): Promise<void> {
    // Autovacuum would get there too, but only a minute or more after a bulk load.
    await this.#pool.query('ANALYZE pets, api_keys');
  }

  async close(): Promise<void> {
    await this.pets.settled();
    if (!this.#pool.ended) await this.#pool.end();
  }
}

const PET_COLUMNS = 'id, name, category_id, status';

/**
 * The hot reads as named statements: each pooled connection has PostgreSQL parse and plan them once,
 * then only binds and executes them, instead of parsing and planning every call. (The benchmark's
 * bare-query figure runs these same statements.)
 */
export const PET_READS = {
  byId: (id: bigint): pg.QueryConfig<[bigint]> => ({
    name: 'pet_by_id',
    text: `SELECT ${PET_COLUMNS} FROM pets WHERE id = $1`,
    values: [id],
  }),
  page: (afterId: bigint, limit: number): pg.QueryConfig<[bigint, number]> => ({
    name: 'pets_page',
    text: `SELECT ${PET_COLUMNS} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`,
    values: [afterId, limit],
  }),
  pageByStatus: (
    status: string,
    afterId: bigint,
    limit: number,
  ): pg.QueryConfig<[string, bigint, number]> => ({
    name: 'pets_page_by_status',
    text: `SELECT ${PET_COLUMNS} FROM pets WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3`,
    values: [status, afterId, limit],
  }),
};

class PostgresPetStore implements PetStore {
  readonly #pool: pg.Pool;
  // One multi-row INSERT in flight at a time; creates arriving meanwhile go together in the next one.
  readonly #creates = new CreateBatcher<PetRecordInput, Pet>((pets) => this.createMany(pets));

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  create(pet: PetRecordInput): Promise<Pet> {
    return this.#creates.add(pet);
  }

  /** Resolves once every create handed to the batcher has been committed or refused. */
  settled(): Promise<void> {
    return this.#creates.settled();
  }

  async createMany(pets: readonly PetRecordInput[]): Promise<Pet[]> {
    if (pets.length === 0) return [];
    // One statement, one commit. WITH ORDINALITY + ORDER BY fixes the insertion order, which is the
    // order the ids are drawn from the sequence and the order RETURNING reports them in.
    const { rows } = await this.#pool.query<{ id: bigint }>({
      name: 'pets_insert', // one text whatever the batch size, so it too is prepared once
      text: `INSERT INTO pets (name, category_id, status)
       SELECT name, category_id, status
       FROM unnest($1::text[], $2::bigint[], $3::text[]) WITH ORDINALITY AS p(name, category_id, status, n)
       ORDER BY n
       RETURNING id`,
      values: [pets.map((p) => p.name), pets.map((p) => p.categoryId), pets.map((p) => p.status)],
    });
    return rows.map((row, i) => ({ id: row.id, ...(pets[i] as PetRecordInput) }));
  }

  async findById(id: bigint): Promise<Pet | undefined> {
    const { rows } = await this.#pool.query<PetRow>(PET_READS.byId(id));
    return rows[0] && toPet(rows[0]);
  }

  async list({ status, afterId, limit }: PetListQuery): Promise<Pet[]> {
    const { rows } = await this.#pool.query<PetRow>(
      status ? PET_READS.pageByStatus(status, afterId, limit) : PET_READS.page(afterId, limit),
    );
    return rows.map(toPet);
  }

  async count(): Promise<number> {
    return countRows(this.#pool, 'pets');
  }

  async importBatch(pets: readonly Pet[]): Promise<number> {
    if (pets.length === 0) return 0;
    return inTransaction(this.#pool, async (client) => {
      // Creates wait until this commits: no id can be handed out while the sequence is moved below.
      await client.query('LOCK TABLE pets IN SHARE ROW EXCLUSIVE MODE');
      const { rowCount } = await client.query(
        `INSERT INTO pets (${PET_COLUMNS})
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[])
         ON CONFLICT (id) DO NOTHING`,
        [
          pets.map((p) => p.id),
          pets.map((p) => p.name),
          pets.map((p) => p.categoryId),
          pets.map((p) => p.status),
        ],
      );
      // Explicit ids leave the identity sequence behind: move it past the largest id, never back.
      // (nextval's own value may go unused; ids need only be unique and ascending, not dense.)
      await client.query(
        `SELECT setval(seq, greatest((SELECT max(id) FROM pets), nextval(seq)))
         FROM CAST(pg_get_serial_sequence('pets', 'id') AS regclass) AS seq`,
      );
      return rowCount ?? 0;
    });
  }
}

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

/**
 * How long a key found active is trusted without asking the database again. Every request looked its
 * key up, doubling the round trips of a `get`; DECISIONS.md allows a revocation "within seconds on every
 * node" (the two-node test: 5 s), and a revocation through this process clears the cache at once.
 */
const ACTIVE_KEY_TTL_MS = 2_000;
/** Beyond this many cached keys the cache starts over: memory stays bounded whatever callers send. */
const ACTIVE_KEY_CACHE_LIMIT = 10_000;

class PostgresApiKeyStore implements ApiKeyStore {
  readonly #pool: pg.Pool;
  readonly #active = new Map<string, { key: ApiKeyRecord; until: number }>();

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
    const now = Date.now();
    const cached = this.#active.get(hash);
    if (cached && cached.until > now) return cached.key;
    const { rows } = await this.#pool.query<ApiKeyRow>({
      name: 'active_api_key_by_hash',
      text: `SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE hash = $1 AND revoked_at IS NULL`,
      values: [hash],
    });
    const key = rows[0] && toApiKey(rows[0]);
    if (key) {
      if (this.#active.size >= ACTIVE_KEY_CACHE_LIMIT) this.#active.clear();
      this.#active.set(hash, { key, until: now + ACTIVE_KEY_TTL_MS });
    } else {
      this.#active.delete(hash);
    }
    return key;
  }

  async list(): Promise<ApiKeyRecord[]> {
    const { rows } = await this.#pool.query<ApiKeyRow>(
      `SELECT ${API_KEY_COLUMNS} FROM api_keys ORDER BY created_at, id`,
    );
    return rows.map(toApiKey);
  }

  async revoke(id: string, at: Date): Promise<boolean> {
    this.#active.clear();
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

async function countRows(pool: pg.Pool, table: 'pets' | 'api_keys'): Promise<number> {
  const { rows } = await pool.query<{ count: bigint }>(`SELECT count(*) AS count FROM ${table}`);
  return Number(rows[0]?.count ?? 0n);
}
