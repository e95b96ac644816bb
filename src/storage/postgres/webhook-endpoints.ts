import type pg from 'pg';
import type {
  EndpointChanges,
  NewWebhookEndpoint,
  WebhookEndpoint,
  WebhookEndpointStore,
} from '../../domain/webhooks.js';
import { countRows } from './count.js';
import { ENDPOINT_COLUMNS, type EndpointRow, toEndpoint } from './endpoint-rows.js';
import { inTransaction, type ReadPool } from './transaction.js';

/** Endpoint creates on every node take turns under this lock: WEBHOOK_MAX_ENDPOINTS is exact. */
const ENDPOINTS_LOCK = 7_304_118_263_520_004n;

/**
 * Webhook endpoints on PostgreSQL, for any number of nodes: creates take turns under a lock
 * (ENDPOINTS_LOCK), so WEBHOOK_MAX_ENDPOINTS holds however many nodes create at once.
 */
export class PostgresWebhookEndpointStore implements WebhookEndpointStore {
  readonly #pool: pg.Pool;
  /** Where the API's reads go: the pool, or the replicas' router (replicas.ts). */
  readonly #reads: ReadPool;

  constructor(pool: pg.Pool, reads: ReadPool = pool) {
    this.#pool = pool;
    this.#reads = reads;
  }

  async #endpoint(db: ReadPool | pg.PoolClient, id: bigint): Promise<WebhookEndpoint | undefined> {
    const { rows } = await db.query<EndpointRow>(
      `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1`,
      [id],
    );
    return rows[0] && toEndpoint(rows[0]);
  }

  async createEndpoint(e: NewWebhookEndpoint, maxEndpoints: number): Promise<WebhookEndpoint | undefined> {
    // Creates take turns (the lock): each counts what the ones before it committed, so racing creates
    // on any nodes cannot pass the limit together.
    return inTransaction(this.#pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [ENDPOINTS_LOCK]);
      const { rows } = await client.query<EndpointRow>(
        `INSERT INTO webhook_endpoints (url, types, description, rate_limit, status, created_at, secret,
           deliver_after)
         SELECT $1, $2, $3, $4, 'enabled', $5, $6, (SELECT coalesce(max(id), 0) FROM events)
         WHERE (SELECT count(*) FROM webhook_endpoints) < $7
         RETURNING ${ENDPOINT_COLUMNS}`,
        [e.url, e.types, e.description, e.rateLimit ?? null, e.createdAt, e.secret, maxEndpoints],
      );
      return rows[0] && toEndpoint(rows[0]);
    });
  }

  async listEndpoints(afterId: bigint, limit: number): Promise<WebhookEndpoint[]> {
    const { rows } = await this.#reads.query<EndpointRow>(
      `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id > $1 ORDER BY id LIMIT $2`,
      [afterId, limit],
    );
    return rows.map(toEndpoint);
  }

  findEndpoint(id: bigint): Promise<WebhookEndpoint | undefined> {
    return this.#endpoint(this.#reads, id);
  }

  async updateEndpoint(id: bigint, changes: EndpointChanges): Promise<WebhookEndpoint | undefined> {
    // Each column named keeps its value unless the change names it; the secret is never touched.
    const { rows } = await this.#pool.query<EndpointRow>(
      `UPDATE webhook_endpoints SET url = coalesce($2, url), types = coalesce($3, types),
         description = coalesce($4, description), rate_limit = CASE WHEN $5 THEN $6::int ELSE rate_limit END
       WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`,
      [
        id,
        changes.url ?? null,
        changes.types ?? null,
        changes.description ?? null,
        changes.rateLimit !== undefined,
        changes.rateLimit ?? null,
      ],
    );
    return rows[0] && toEndpoint(rows[0]);
  }

  async deleteEndpoint(id: bigint): Promise<boolean> {
    const { rowCount } = await this.#pool.query('DELETE FROM webhook_endpoints WHERE id = $1', [id]);
    return (rowCount ?? 0) > 0;
  }

  async enableEndpoint(id: bigint): Promise<WebhookEndpoint | undefined> {
    const { rows } = await this.#pool.query<EndpointRow>(
      // Enabled again, it gets the events from now on; one enabled already keeps every event it is owed.
      `UPDATE webhook_endpoints SET status = 'enabled', disabled_reason = NULL, failing_since = NULL,
         deliver_after = CASE WHEN status = 'disabled' THEN (SELECT coalesce(max(id), 0) FROM events)
           ELSE deliver_after END
       WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`,
      [id],
    );
    return rows[0] && toEndpoint(rows[0]);
  }

  async rotateSecret(id: bigint, secret: string, previousUntil: Date): Promise<WebhookEndpoint | undefined> {
    const { rows } = await this.#pool.query<EndpointRow>(
      `UPDATE webhook_endpoints SET previous_secret = secret, secret = $1, previous_secret_until = $2
       WHERE id = $3 RETURNING ${ENDPOINT_COLUMNS}`,
      [secret, previousUntil, id],
    );
    return rows[0] && toEndpoint(rows[0]);
  }

  count(): Promise<number> {
    return countRows(this.#pool, 'webhook_endpoints');
  }

  async importEndpoints(endpoints: readonly WebhookEndpoint[]): Promise<number> {
    if (endpoints.length === 0) return 0;
    return inTransaction(this.#pool, async (client) => {
      let inserted = 0;
      for (const e of endpoints) {
        const { rowCount } = await client.query(
          `INSERT INTO webhook_endpoints (${ENDPOINT_COLUMNS}, deliver_after)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
             (SELECT coalesce(max(id), 0) FROM events))
           ON CONFLICT (id) DO NOTHING`,
          [
            e.id,
            e.url,
            e.types,
            e.description,
            e.rateLimit ?? null,
            e.status,
            e.disabledReason ?? null,
            e.createdAt,
            e.secret,
            e.previousSecret ?? null,
            e.previousSecretUntil ?? null,
            e.lastSuccessAt ?? null,
            e.failingSince ?? null,
          ],
        );
        inserted += rowCount ?? 0;
      }
      await client.query(
        `SELECT setval(seq, greatest((SELECT max(id) FROM webhook_endpoints), nextval(seq)))
         FROM CAST(pg_get_serial_sequence('webhook_endpoints', 'id') AS regclass) AS seq`,
      );
      return inserted;
    });
  }
}
