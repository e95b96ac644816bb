import type Database from 'better-sqlite3';
import { ORDER_STATUSES } from '../../domain/order.js';
import { PET_STATUSES } from '../../domain/pet.js';
import type { SchemaVersions } from '../../domain/storage.js';
import {
  ATTEMPT_TRIGGERS,
  WEBHOOK_DELIVERY_STATUSES,
  WEBHOOK_ENDPOINT_STATUSES,
} from '../../domain/webhooks.js';
import { assertSchemaKnown } from '../schema-version.js';
import { MIGRATED_EVENT_TYPES, sqlList } from '../sql.js';

/**
 * Schema versions, applied in order at start; `PRAGMA user_version` records how far a database has got.
 * Append only: a released migration is never edited. Value lists (statuses) come from the domain's
 * constants, so both adapters check the same values; changing one needs a migration of its own.
 */
export const SQLITE_MIGRATIONS: readonly string[] = [
  `CREATE TABLE pets (
     id          INTEGER PRIMARY KEY AUTOINCREMENT,
     name        TEXT    NOT NULL,
     category_id INTEGER NOT NULL,
     status      TEXT    NOT NULL CHECK (status IN (${sqlList(PET_STATUSES)}))
   );
   -- Keyset paging with a status filter walks this index in id order, whatever the table's size.
   CREATE INDEX pets_status_id ON pets (status, id);

   CREATE TABLE api_keys (
     id         TEXT PRIMARY KEY,
     name       TEXT NOT NULL,
     hash       TEXT NOT NULL UNIQUE,
     hint       TEXT NOT NULL,
     created_at TEXT NOT NULL,
     revoked_at TEXT
   );

   CREATE TABLE shared_secrets (
     name  TEXT PRIMARY KEY,
     value BLOB NOT NULL
   );`,
  // Idempotency-Key records (POST /v1/pets): one per API key and key; created_at in epoch milliseconds.
  `CREATE TABLE idempotency_keys (
     api_key_hash TEXT    NOT NULL,
     key          TEXT    NOT NULL,
     request_hash TEXT    NOT NULL,
     pet_id       INTEGER REFERENCES pets (id),
     created_at   INTEGER NOT NULL,
     PRIMARY KEY (api_key_hash, key)
   );
   CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);`,
  // /readyz writes this one row: a database that can be read but not written is not ready.
  `CREATE TABLE readiness_probe (
     id         INTEGER PRIMARY KEY CHECK (id = 1),
     checked_at INTEGER NOT NULL
   );`,
  // The Store (docs/api.md): orders, placed_at in epoch milliseconds, and placeOrder's Idempotency-Key
  // records. Pets and keys are left as they are.
  `CREATE TABLE orders (
     id        INTEGER PRIMARY KEY AUTOINCREMENT,
     pet_id    INTEGER NOT NULL REFERENCES pets (id),
     status    TEXT    NOT NULL CHECK (status IN (${sqlList(ORDER_STATUSES)})),
     placed_at INTEGER NOT NULL
   );
   -- At most one placed order per animal: the database refuses a second one, whoever asks.
   CREATE UNIQUE INDEX orders_placed_pet ON orders (pet_id) WHERE status = 'placed';
   -- Keyset paging with a status or a petId filter walks one of these in id order.
   CREATE INDEX orders_status_id ON orders (status, id);
   CREATE INDEX orders_pet_id_id ON orders (pet_id, id);

   CREATE TABLE order_idempotency_keys (
     api_key_hash TEXT    NOT NULL,
     key          TEXT    NOT NULL,
     request_hash TEXT    NOT NULL,
     order_id     INTEGER REFERENCES orders (id),
     created_at   INTEGER NOT NULL,
     PRIMARY KEY (api_key_hash, key)
   );
   CREATE INDEX order_idempotency_keys_created_at ON order_idempotency_keys (created_at);`,
  // API key scopes and lifetimes (docs/api.md). Scopes are space-separated (RFC 6749 §3.3); keys that
  // exist keep working with all four, while a key inserted without scopes has none. Instants as text.
  `ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT '';
   UPDATE api_keys SET scopes = 'pets:read pets:write orders:read orders:write';
   ALTER TABLE api_keys ADD COLUMN expires_at TEXT;
   ALTER TABLE api_keys ADD COLUMN last_used_at TEXT;`,
  // Events and webhooks. Instants in epoch milliseconds; an endpoint's types are '*' or the types
  // separated by spaces. Keys that had all four scopes get the three new ones; narrower keys keep theirs.
  `CREATE TABLE events (
     id          INTEGER PRIMARY KEY AUTOINCREMENT,
     type        TEXT    NOT NULL CHECK (type IN (${sqlList(MIGRATED_EVENT_TYPES.first)})),
     occurred_at INTEGER NOT NULL,
     data        TEXT    NOT NULL
   );
   CREATE INDEX events_type_id ON events (type, id);
   CREATE INDEX events_occurred_at ON events (occurred_at);

   CREATE TABLE webhook_endpoints (
     id                    INTEGER PRIMARY KEY AUTOINCREMENT,
     url                   TEXT    NOT NULL,
     types                 TEXT    NOT NULL,
     description           TEXT    NOT NULL,
     status                TEXT    NOT NULL CHECK (status IN (${sqlList(WEBHOOK_ENDPOINT_STATUSES)})),
     disabled_reason       TEXT,
     created_at            INTEGER NOT NULL,
     secret                TEXT    NOT NULL,
     previous_secret       TEXT,
     previous_secret_until INTEGER,
     -- The first failure since the last success: failing for WEBHOOK_DISABLE_AFTER disables the endpoint.
     failing_since         INTEGER
   );

   CREATE TABLE webhook_deliveries (
     endpoint_id          INTEGER NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
     event_id             INTEGER NOT NULL,
     status               TEXT    NOT NULL CHECK (status IN (${sqlList(WEBHOOK_DELIVERY_STATUSES)})),
     attempts             INTEGER NOT NULL,
     last_attempt_at      INTEGER,
     next_attempt_at      INTEGER,
     last_response_status INTEGER,
     last_error           TEXT,
     -- Until then one node holds it for an attempt; a node that dies lets it go when this passes.
     lease_until          INTEGER,
     PRIMARY KEY (endpoint_id, event_id)
   );
   -- The next delivery due, overall and per endpoint, and each endpoint's leases: index lookups, whatever
   -- the backlog.
   CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
   CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (endpoint_id, next_attempt_at)
     WHERE status = 'pending';
   CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_until) WHERE lease_until IS NOT NULL;
   CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

   UPDATE api_keys SET scopes = scopes || ' events:read webhooks:read webhooks:write'
   WHERE scopes = 'pets:read pets:write orders:read orders:write';`,
  // What caused each event: the W3C traceparent of the request that made the change, for the trace
  // links of its deliveries; null when tracing was off. Never part of the Event served.
  'ALTER TABLE events ADD COLUMN trace_context TEXT;',
  // An endpoint's deliveries by status, newest first (listWebhookDeliveries?status=): an index search,
  // not a walk through every delivery of the endpoint (1M of them took 210-380 ms a page).
  'CREATE INDEX webhook_deliveries_endpoint_status ON webhook_deliveries (endpoint_id, status, event_id);',
  // Deliveries fan out from the events after the change's transaction (delivery-queue.ts, fanOut), not in it:
  // the last event given its deliveries, one row. Events before this version got theirs in their own
  // transaction. An endpoint gets the events after deliver_after (the newest event when it was created
  // or enabled again).
  `CREATE TABLE webhook_fanout (
     id            integer PRIMARY KEY CHECK (id = 1),
     last_event_id INTEGER  NOT NULL
   );
   INSERT INTO webhook_fanout (id, last_event_id) SELECT 1, coalesce(max(id), 0) FROM events;
   ALTER TABLE webhook_endpoints ADD COLUMN deliver_after INTEGER NOT NULL DEFAULT 0;`, // Which process holds a delivery's lease: a process may lease more of an endpoint's deliveries than it
  // attempts at once (they wait in its queue) only while no other process holds any of that endpoint's.
  'ALTER TABLE webhook_deliveries ADD COLUMN lease_owner TEXT;',
  // Every attempt, as GET …/deliveries/{eventId}/attempts lists it; gone with its delivery (and so with
  // its event). What asks for a delivery's next attempt (a person's retry, a recovery) is kept on it.
  `ALTER TABLE webhook_deliveries ADD COLUMN next_trigger TEXT NOT NULL DEFAULT 'schedule'
     CHECK (next_trigger IN (${sqlList(ATTEMPT_TRIGGERS)}));
   CREATE TABLE webhook_attempts (
     endpoint_id     INTEGER NOT NULL,
     event_id        INTEGER NOT NULL,
     number          INTEGER NOT NULL,
     started_at      INTEGER NOT NULL,
     duration_ms     INTEGER NOT NULL,
     response_status INTEGER,
     response_body   TEXT,
     error           TEXT,
     trigger         TEXT    NOT NULL CHECK (trigger IN (${sqlList(ATTEMPT_TRIGGERS)})),
     PRIMARY KEY (endpoint_id, event_id, number),
     FOREIGN KEY (endpoint_id, event_id) REFERENCES webhook_deliveries (endpoint_id, event_id) ON DELETE CASCADE
   ) WITHOUT ROWID;`,
  // When a delivery to the endpoint last succeeded (written at most once a second per endpoint).
  'ALTER TABLE webhook_endpoints ADD COLUMN last_success_at INTEGER;',
  // webhook_endpoint.disabled joins the event types. SQLite cannot change a CHECK in place: the table is
  // rebuilt (sqlite.org/lang_altertable.html, "other kinds of changes"; no foreign key points at it), and
  // its AUTOINCREMENT counter carried over, so an id deleted by retention is never used again.
  `CREATE TABLE events_rebuilt (
     id            INTEGER PRIMARY KEY AUTOINCREMENT,
     type          TEXT    NOT NULL CHECK (type IN (${sqlList(MIGRATED_EVENT_TYPES.endpointDisabled)})),
     occurred_at   INTEGER NOT NULL,
     data          TEXT    NOT NULL,
     trace_context TEXT
   );
   INSERT INTO events_rebuilt (id, type, occurred_at, data, trace_context)
     SELECT id, type, occurred_at, data, trace_context FROM events ORDER BY id;
   DELETE FROM sqlite_sequence WHERE name = 'events_rebuilt';
   INSERT INTO sqlite_sequence (name, seq) SELECT 'events_rebuilt', seq FROM sqlite_sequence WHERE name = 'events';
   DROP TABLE events;
   ALTER TABLE events_rebuilt RENAME TO events;
   CREATE INDEX events_type_id ON events (type, id);
   CREATE INDEX events_occurred_at ON events (occurred_at);`,
  // An endpoint's rateLimit (deliveries a second; null: none), and its token bucket, taken at each claim
  // by whichever process claims: the limit holds across all of them.
  `ALTER TABLE webhook_endpoints ADD COLUMN rate_limit INTEGER CHECK (rate_limit BETWEEN 1 AND 10000);
   ALTER TABLE webhook_endpoints ADD COLUMN throttle_tokens REAL;
   ALTER TABLE webhook_endpoints ADD COLUMN throttle_at INTEGER;`,
  // Recoveries under way (POST …/recover), one per endpoint: the window of event times, and the last
  // event whose failed delivery the deliverer moved back to pending. An endpoint's due deliveries are
  // claimed in event order among those due at the same instant (a recovery's batch is).
  `CREATE TABLE webhook_recoveries (
     endpoint_id    INTEGER PRIMARY KEY REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
     since          INTEGER NOT NULL,
     until          INTEGER NOT NULL,
     after_event_id INTEGER NOT NULL,
     created_at     INTEGER NOT NULL
   );
   DROP INDEX webhook_deliveries_endpoint_due;
   CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (endpoint_id, next_attempt_at, event_id)
     WHERE status = 'pending';
   -- recover's Idempotency-Key records: what the first request answered (how many it queued).
   CREATE TABLE recover_idempotency_keys (
     api_key_hash TEXT    NOT NULL,
     key          TEXT    NOT NULL,
     request_hash TEXT    NOT NULL,
     queued       INTEGER,
     created_at   INTEGER NOT NULL,
     PRIMARY KEY (api_key_hash, key)
   );
   CREATE INDEX recover_idempotency_keys_created_at ON recover_idempotency_keys (created_at);`,
];

/**
 * Brings the schema up to date; resolves to the versions before and after. A schema newer than this
 * build knows is refused (SchemaTooNewError), and left as it is.
 */
export function migrate(db: Database.Database): SchemaVersions {
  // The version is read inside the write transaction: a process that waited for another's migration
  // then sees it done instead of running it a second time.
  return db
    .transaction(() => {
      const applied = db.pragma('user_version', { simple: true }) as number;
      assertSchemaKnown(applied, SQLITE_MIGRATIONS.length);
      for (let version = applied; version < SQLITE_MIGRATIONS.length; version++) {
        db.exec(SQLITE_MIGRATIONS[version] as string);
        db.pragma(`user_version = ${version + 1}`);
      }
      return { from: applied, to: Math.max(applied, SQLITE_MIGRATIONS.length) };
    })
    .immediate();
}
