import pg from 'pg';
import { BetterSqlite3 } from '../../src/storage/sqlite/driver.js';

/**
 * Reads a test database directly, past the service and its storage adapter: what is really on disk.
 * `url` is a DATABASE_URL as the backends in backends.ts make them (sqlite:<file>, or postgres://… with
 * the test's own schema on its search_path).
 */
export async function queryDatabase<T = Record<string, unknown>>(url: string, sql: string): Promise<T[]> {
  if (url.startsWith('sqlite:')) {
    const db = new BetterSqlite3(url.slice('sqlite:'.length), { readonly: true, fileMustExist: true });
    try {
      return db.prepare(sql).all() as T[];
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

/**
 * Writes to a test database directly, past the service (SQLite: creating the file if need be): for a
 * database as an older version left it, or to show that the database itself refuses what the service
 * would never send.
 */
export async function executeSql(url: string, sql: string): Promise<void> {
  if (url.startsWith('sqlite:')) {
    const db = new BetterSqlite3(url.slice('sqlite:'.length));
    try {
      db.exec(sql);
    } finally {
      db.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** The names of the tables of the service's schema, sorted. */
export async function tableNames(url: string): Promise<string[]> {
  const rows = url.startsWith('sqlite:')
    ? await queryDatabase<{ name: string }>(
        url,
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
      )
    : await queryDatabase<{ name: string }>(
        url,
        'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name',
      );
  return rows.map((row) => row.name);
}

/** Every pet row as stored, in id order, with int64 columns as decimal text (exact on both backends). */
export async function storedPets(
  url: string,
): Promise<{ id: string; name: string; categoryId: string; status: string }[]> {
  const sql = url.startsWith('sqlite:')
    ? 'SELECT CAST(id AS TEXT) AS id, name, CAST(category_id AS TEXT) AS "categoryId", status FROM pets ORDER BY pets.id'
    : 'SELECT id::text AS id, name, category_id::text AS "categoryId", status FROM pets ORDER BY pets.id';
  return queryDatabase(url, sql);
}

/**
 * "ok" when the pets table is sound: SQLite's own PRAGMA integrity_check; on PostgreSQL, the table
 * answers a full scan and an index scan alike, with every id distinct.
 */
export async function integrityCheck(url: string): Promise<string> {
  if (url.startsWith('sqlite:')) {
    const rows = await queryDatabase<{ integrity_check: string }>(url, 'PRAGMA integrity_check');
    return rows.map((row) => row.integrity_check).join('; ');
  }
  const [row] = await queryDatabase<{ rows: string; ids: string }>(
    url,
    'SELECT count(*) AS rows, count(DISTINCT id) AS ids FROM pets',
  );
  return row && row.rows === row.ids ? 'ok' : `pets: ${row?.rows} rows but ${row?.ids} distinct ids`;
}

/** How many pets the query planner's statistics count: 0 while the table was never analysed. */
export async function plannedPetRows(url: string): Promise<number> {
  if (url.startsWith('sqlite:')) {
    const [table] = await queryDatabase(url, "SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'");
    if (!table) return 0;
    const [row] = await queryDatabase<{ stat: string }>(
      url,
      "SELECT stat FROM sqlite_stat1 WHERE tbl = 'pets' LIMIT 1",
    );
    return row ? Number(row.stat.split(' ')[0]) : 0;
  }
  const [row] = await queryDatabase<{ rows: string }>(
    url,
    "SELECT reltuples::bigint::text AS rows FROM pg_class WHERE oid = 'pets'::regclass",
  );
  return Math.max(0, Number(row?.rows ?? 0));
}
