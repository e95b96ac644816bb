import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import type Database from 'better-sqlite3';
import { ApiKeyCache } from '../../domain/api-key-cache.js';
import type { EventStore } from '../../domain/events.js';
import type {
  ApiKeyStore,
  IdempotencyStore,
  OrderStore,
  PetStore,
  SchemaVersions,
  Storage,
} from '../../domain/storage.js';
import type { DeliveryQueue, WebhookEndpointStore } from '../../domain/webhooks.js';
import { offerUntranslated } from '../boundary.js';
import { toStorageError, translateUnavailable } from '../unavailable.js';
import { SqliteApiKeyStore } from './api-keys.js';
import { SqliteDeliveryQueue } from './delivery-queue.js';
import { BetterSqlite3 } from './driver.js';
import { isSqliteUnavailable } from './errors.js';
import { SqliteEventLog, SqliteEventStore } from './events.js';
import { SqliteIdempotencyStore } from './idempotency.js';
import { retryWhileLocked, waitingForLocks } from './lock-waits.js';
import { migrate } from './migrations.js';
import { SqliteOrderStore } from './orders.js';
import { SqlitePetStore } from './pets.js';
import { SqliteSecrets } from './secrets.js';
import { SqliteWebhookEndpointStore } from './webhook-endpoints.js';

export interface SqliteOptions {
  /** Longest wait for a lock another process holds (DATABASE_TIMEOUT_MS). */
  timeoutMs: number;
}

/** The readiness probe's own bound on a lock wait: /readyz answers within a second. */
const PROBE_LOCK_WAIT_MS = 900;

const PROBE_WRITE =
  'INSERT INTO readiness_probe (id, checked_at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at';

/**
 * The database holds the cursor secret, key hashes and every record: a new one is readable by its
 * owner alone, whatever the umask (022 would make it world-readable). The folders made for it are
 * 0700, the file 0600, and SQLite gives its -wal and -shm files the database file's mode.
 */
function createPrivately(path: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  closeSync(openSync(path, 'a', 0o600));
}

/** The embedded default: one file, no server. `:memory:` gives a throwaway database. */
export class SqliteStorage implements Storage {
  readonly pets: PetStore;
  readonly orders: OrderStore;
  readonly apiKeys: ApiKeyStore;
  readonly idempotency: IdempotencyStore;
  readonly events: EventStore;
  readonly webhookEndpoints: WebhookEndpointStore;
  readonly deliveries: DeliveryQueue;
  readonly schema: SchemaVersions;
  readonly #db: Database.Database;
  readonly #secrets: SqliteSecrets;
  readonly #timeoutMs: number;
  readonly #probe: Database.Statement<[number]>;

  constructor(path: string, { timeoutMs }: SqliteOptions) {
    if (path !== ':memory:') createPrivately(path);
    this.#db = new BetterSqlite3(path);
    this.#timeoutMs = timeoutMs;
    // First, so that every step below waits for a process opening the same file (a worker) to finish.
    this.#db.pragma(`busy_timeout = ${timeoutMs}`);
    this.#db.pragma('journal_mode = WAL');
    // FULL: a commit is on disk before it returns, so a 201 survives a crash the instant after.
    this.#db.pragma('synchronous = FULL');
    this.#db.pragma('foreign_keys = ON');
    try {
      this.schema = migrate(this.#db);
    } catch (error) {
      this.#db.close(); // a schema this build refuses (or a failed migration): nothing stays open
      throw error;
    }
    // From here on a call that meets another process's lock returns at once, and is tried again after
    // a pause (lock-waits.ts): SQLite's own wait would block the event loop.
    this.#db.pragma('busy_timeout = 0');
    const locking = <T extends object>(store: T): T => waitingForLocks(store, timeoutMs);
    const adapt = <T extends object>(store: T): T =>
      translateUnavailable(locking(store), isSqliteUnavailable);
    const idempotency = new SqliteIdempotencyStore(this.#db);
    const log = new SqliteEventLog(this.#db);
    const stores = {
      pets: locking(new SqlitePetStore(this.#db, idempotency.pets, log)),
      orders: locking(new SqliteOrderStore(this.#db, idempotency.orders, log)),
      idempotency: locking(idempotency),
      events: locking(new SqliteEventStore(this.#db, log)),
      webhookEndpoints: locking(new SqliteWebhookEndpointStore(this.#db)),
      deliveries: locking(new SqliteDeliveryQueue(this.#db, log, idempotency.recoveries)),
    };
    this.pets = translateUnavailable(stores.pets, isSqliteUnavailable);
    this.orders = translateUnavailable(stores.orders, isSqliteUnavailable);
    this.events = translateUnavailable(stores.events, isSqliteUnavailable);
    this.webhookEndpoints = translateUnavailable(stores.webhookEndpoints, isSqliteUnavailable);
    this.deliveries = translateUnavailable(stores.deliveries, isSqliteUnavailable);
    // A lookup is microseconds here: only refusals are remembered, so a revocation is effective at once.
    this.apiKeys = new ApiKeyCache(adapt(new SqliteApiKeyStore(this.#db)), { rememberActive: false });
    this.idempotency = translateUnavailable(stores.idempotency, isSqliteUnavailable);
    this.#secrets = adapt(new SqliteSecrets(this.#db));
    // The app's boundary translates in its own pass (boundary.ts).
    offerUntranslated(this, stores, (error) => toStorageError(error, isSqliteUnavailable));
    this.#probe = this.#db.prepare(PROBE_WRITE);
  }

  sharedSecret(name: string): Promise<Buffer> {
    return this.#secrets.get(name);
  }

  /** A real write, committed: a database that can still be read but not written (full, read-only) fails. */
  async ping(): Promise<void> {
    try {
      await retryWhileLocked(
        () => this.#probe.run(Date.now()),
        Math.min(PROBE_LOCK_WAIT_MS, this.#timeoutMs),
      );
    } catch (error) {
      throw toStorageError(error, isSqliteUnavailable);
    }
  }

  /**
   * Deliberately nothing. SQLite already plans these queries on the right indexes without statistics,
   * and with them (ANALYZE writes STAT4 samples) it re-plans a statement whenever a value bound to an
   * indexed column changes: a status page then cost 158 µs of CPU instead of 115 in the benchmark.
   */
  async analyze(): Promise<void> {}

  async close(): Promise<void> {
    await Promise.all([this.pets.settled(), this.orders.settled()]);
    if (this.#db.open) this.#db.close();
  }
}
