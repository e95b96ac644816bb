/**
 * Schema versions, applied in order at start; `PRAGMA user_version` records how far a database has got.
 * Append only: a released migration is never edited.
 */
export const SQLITE_MIGRATIONS: readonly string[] = [
  `CREATE TABLE pets (
     id          INTEGER PRIMARY KEY AUTOINCREMENT,
     name        TEXT    NOT NULL,
     category_id INTEGER NOT NULL,
     status      TEXT    NOT NULL CHECK (status IN ('available', 'pending', 'sold'))
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
];
