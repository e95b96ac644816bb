import type Database from 'better-sqlite3';
import type {
  EndpointChanges,
  NewWebhookEndpoint,
  WebhookEndpoint,
  WebhookEndpointStore,
} from '../../domain/webhooks.js';
import { ENDPOINT_COLUMNS, type EndpointRow, toEndpoint, typesText } from './endpoint-rows.js';

/**
 * Webhook endpoints on SQLite; instants in epoch milliseconds. A create is one statement, and SQLite
 * has one writer at a time across the processes on the file: WEBHOOK_MAX_ENDPOINTS is exact.
 */
export class SqliteWebhookEndpointStore implements WebhookEndpointStore {
  readonly #db: Database.Database;

  constructor(db: Database.Database) {
    this.#db = db;
  }

  #endpoint(id: bigint): WebhookEndpoint | undefined {
    const row = this.#db
      .prepare<[bigint], EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ?`)
      .safeIntegers(true)
      .get(id);
    return row && toEndpoint(row);
  }

  async createEndpoint(e: NewWebhookEndpoint, maxEndpoints: number): Promise<WebhookEndpoint | undefined> {
    // One statement, and SQLite has one writer at a time: racing creates cannot pass the limit together.
    const id = this.#db
      .prepare<[string, string, string, number | null, number, string, number], bigint>(
        `INSERT INTO webhook_endpoints (url, types, description, rate_limit, status, created_at, secret, deliver_after)
         SELECT ?, ?, ?, ?, 'enabled', ?, ?, (SELECT coalesce(max(id), 0) FROM events)
         WHERE (SELECT count(*) FROM webhook_endpoints) < ? RETURNING id`,
      )
      .pluck()
      .safeIntegers(true)
      .get(
        e.url,
        typesText(e.types),
        e.description,
        e.rateLimit ?? null,
        e.createdAt.getTime(),
        e.secret,
        maxEndpoints,
      );
    return id === undefined ? undefined : this.#endpoint(id);
  }

  async listEndpoints(afterId: bigint, limit: number): Promise<WebhookEndpoint[]> {
    return this.#db
      .prepare<[bigint, number], EndpointRow>(
        `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id > ? ORDER BY id LIMIT ?`,
      )
      .safeIntegers(true)
      .all(afterId, limit)
      .map(toEndpoint);
  }

  async findEndpoint(id: bigint): Promise<WebhookEndpoint | undefined> {
    return this.#endpoint(id);
  }

  async updateEndpoint(id: bigint, changes: EndpointChanges): Promise<WebhookEndpoint | undefined> {
    // Each column named keeps its value unless the change names it; the secret is never touched.
    const row = this.#db
      .prepare<[Record<string, unknown>], EndpointRow>(
        `UPDATE webhook_endpoints SET url = coalesce(@url, url), types = coalesce(@types, types),
           description = coalesce(@description, description),
           rate_limit = CASE WHEN @setRateLimit THEN @rateLimit ELSE rate_limit END
         WHERE id = @id RETURNING ${ENDPOINT_COLUMNS}`,
      )
      .safeIntegers(true)
      .get({
        id,
        url: changes.url ?? null,
        types: changes.types ? typesText(changes.types) : null,
        description: changes.description ?? null,
        setRateLimit: changes.rateLimit === undefined ? 0 : 1,
        rateLimit: changes.rateLimit ?? null,
      });
    return row && toEndpoint(row);
  }

  async deleteEndpoint(id: bigint): Promise<boolean> {
    // The deliveries go with it (ON DELETE CASCADE).
    return this.#db.prepare<[bigint]>('DELETE FROM webhook_endpoints WHERE id = ?').run(id).changes > 0;
  }

  async enableEndpoint(id: bigint): Promise<WebhookEndpoint | undefined> {
    this.#db
      .prepare<[bigint]>(
        // Enabled again, it gets the events from now on; one enabled already keeps every event it is owed.
        `UPDATE webhook_endpoints SET status = 'enabled', disabled_reason = NULL, failing_since = NULL,
           deliver_after = CASE WHEN status = 'disabled' THEN (SELECT coalesce(max(id), 0) FROM events)
             ELSE deliver_after END
         WHERE id = ?`,
      )
      .run(id);
    return this.#endpoint(id);
  }

  async rotateSecret(id: bigint, secret: string, previousUntil: Date): Promise<WebhookEndpoint | undefined> {
    this.#db
      .prepare<[string, number, bigint]>(
        `UPDATE webhook_endpoints SET previous_secret = secret, secret = ?, previous_secret_until = ? WHERE id = ?`,
      )
      .run(secret, previousUntil.getTime(), id);
    return this.#endpoint(id);
  }

  async count(): Promise<number> {
    return this.#db.prepare<[], number>('SELECT count(*) FROM webhook_endpoints').pluck().get() as number;
  }

  async importEndpoints(endpoints: readonly WebhookEndpoint[]): Promise<number> {
    const insert = this.#db.prepare(
      `INSERT INTO webhook_endpoints (${ENDPOINT_COLUMNS}, deliver_after)
       VALUES (@id, @url, @types, @description, @rateLimit, @status, @disabledReason, @createdAt, @secret, @previousSecret,
         @previousSecretUntil, @lastSuccessAt, @failingSince, (SELECT coalesce(max(id), 0) FROM events))
       ON CONFLICT (id) DO NOTHING`,
    );
    return this.#db
      .transaction(() =>
        endpoints.reduce(
          (inserted, e) =>
            inserted +
            insert.run({
              id: e.id,
              url: e.url,
              types: typesText(e.types),
              description: e.description,
              rateLimit: e.rateLimit ?? null,
              status: e.status,
              disabledReason: e.disabledReason ?? null,
              createdAt: e.createdAt.getTime(),
              secret: e.secret,
              previousSecret: e.previousSecret ?? null,
              previousSecretUntil: e.previousSecretUntil?.getTime() ?? null,
              lastSuccessAt: e.lastSuccessAt?.getTime() ?? null,
              failingSince: e.failingSince?.getTime() ?? null,
            }).changes,
          0,
        ),
      )
      .immediate();
  }
}
