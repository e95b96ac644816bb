import assert from 'node:assert/strict';
import pg from 'pg';
import type { EventListQuery } from '../../src/domain/events.js';
import type { OrderListQuery, PetListQuery, Storage } from '../../src/domain/storage.js';
import type { DeliveryListQuery } from '../../src/domain/webhooks.js';
import { BetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import { after, backends, before, type TestDatabase, test } from '../support/backends.js';
import { executeSql } from '../support/db-inspect.js';
import { explain, type PlanNode } from '../support/query-plans.js';

/**
 * Every list operation, with each of its filters, reads through an index whose condition includes that
 * filter's column, on both backends: a filter the index does not serve makes the database read every
 * row the other conditions leave (deliveries by status read all of an endpoint's deliveries: 210-380 ms
 * a page at 1M of them, on SQLite's event loop). Each query type's filters are listed below as a
 * Record over its keys, so a filter added to a query type does not compile until it is listed here,
 * and then this test asks for its index.
 */
type Filters<Q> = Record<Exclude<keyof Q, 'limit'>, { column: string; value: unknown }>;

const PET_FILTERS: Filters<PetListQuery> = {
  afterId: { column: 'id', value: 1_990n },
  status: { column: 'status', value: 'sold' },
  // At most MAX_SELECTED_IDS ids: the key index finds them; any other condition filters those few rows.
  ids: { column: 'id', value: [3n, 5n, 7n] },
};
const ORDER_FILTERS: Filters<OrderListQuery> = {
  afterId: { column: 'id', value: 1_990n },
  status: { column: 'status', value: 'cancelled' },
  petId: { column: 'pet_id', value: 42n },
  ids: { column: 'id', value: [3n, 5n, 7n] },
};
const EVENT_FILTERS: Filters<EventListQuery> = {
  afterId: { column: 'id', value: 1_990n },
  types: { column: 'type', value: ['order.cancelled'] },
};
const DELIVERY_FILTERS: Filters<DeliveryListQuery> = {
  endpointId: { column: 'endpoint_id', value: 1n },
  beforeEventId: { column: 'event_id', value: 10n },
  status: { column: 'status', value: 'failed' },
};

const ROWS = 2_000;

/** What a statement was run with: its SQL and its parameters, as the driver was given them. */
interface Ran {
  sql: string;
  params: unknown[];
}

/** Records every statement the drivers run (better-sqlite3's statements, node-postgres's queries). */
function recordStatements(): { ran: Ran[]; stop: () => void } {
  const ran: Ran[] = [];
  const db = new BetterSqlite3(':memory:');
  const statement = Object.getPrototypeOf(db.prepare('SELECT 1')) as Record<string, unknown>;
  db.close();
  const restore: (() => void)[] = [];
  for (const method of ['all', 'get', 'iterate']) {
    const original = statement[method] as (...args: unknown[]) => unknown;
    statement[method] = function (this: { source: string }, ...args: unknown[]) {
      ran.push({ sql: this.source, params: args });
      return original.apply(this, args);
    };
    restore.push(() => {
      statement[method] = original;
    });
  }
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const [config, values] = args;
    if (typeof config === 'string') ran.push({ sql: config, params: Array.isArray(values) ? values : [] });
    else if (config && typeof config === 'object' && 'text' in config)
      ran.push({
        sql: String(config.text),
        params: (config as { values?: unknown[] }).values ?? (Array.isArray(values) ? values : []),
      });
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof query;
  restore.push(() => {
    pg.Client.prototype.query = query;
  });
  return {
    ran,
    stop: () => {
      for (const undo of restore) undo();
    },
  };
}

/** Where each index read of `table` is, with the columns of its condition; seq scans have none. */
interface Access {
  how: string;
  columns: string[];
}

/** SQLite: `SEARCH pets USING INDEX pets_status_id (status=? AND id>?)`; a SCAN reads every row. */
function sqlitePlan(url: string, { sql, params }: Ran, table: string): Access[] {
  const db = new BetterSqlite3(url.slice('sqlite:'.length), { readonly: true });
  try {
    const steps = db
      .prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
      .all(...params)
      .map((row) => row.detail)
      .filter((detail) => new RegExp(`^(SCAN|SEARCH) ${table}\\b`).test(detail));
    return steps.map((detail) => ({
      how: detail,
      columns: detail.startsWith('SEARCH')
        ? [...(/\((.*)\)$/.exec(detail)?.[1] ?? '').matchAll(/(\w+)\s*(?:[=<>]|IN\b)/g)].map((m) =>
            (m[1] as string) === 'rowid' ? 'id' : (m[1] as string),
          )
        : [],
    }));
  } finally {
    db.close();
  }
}

/** PostgreSQL: with sequential scans priced out, the index scans of `table` and their Index Cond columns. */
async function postgresPlan(url: string, { sql, params }: Ran, table: string): Promise<Access[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('SET enable_seqscan = off');
    const plan = await explain(client, sql, params);
    const accesses: Access[] = [];
    const walk = (node: PlanNode, relation?: string) => {
      const on = node['Relation Name'] ?? relation;
      if (node['Node Type'] === 'Seq Scan' && on === table) accesses.push({ how: 'Seq Scan', columns: [] });
      if (/Index/.test(node['Node Type']) && (on === table || node['Index Name']?.startsWith(table))) {
        const cond = node['Index Cond'] ?? '';
        accesses.push({
          how: `${node['Node Type']} ${node['Index Name']} ${cond}`,
          columns: [...cond.matchAll(/(\w+)\s*(?:[=<>]|= ANY)/g)].map((m) => m[1] as string),
        });
      }
      for (const child of node.Plans ?? [])
        walk(child, node['Node Type'] === 'Bitmap Heap Scan' ? on : undefined);
    };
    walk(plan);
    return accesses;
  } finally {
    await client.end();
  }
}

/** Rows enough, and skewed, that a planner with statistics prefers the index to reading everything. */
function fill(url: string): string {
  const sqlite = url.startsWith('sqlite:');
  const at = sqlite ? '0' : "'2026-01-01T00:00:00Z'";
  const series = sqlite
    ? `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS})`
    : '';
  const from = sqlite ? 'FROM n' : `FROM generate_series(1, ${ROWS}) AS n(i)`;
  return `
    ${series} INSERT INTO pets (id, name, category_id, status)
      SELECT i, 'p' || i, 1, CASE WHEN i % 200 = 0 THEN 'sold' ELSE 'available' END ${from};
    ${series} INSERT INTO orders (id, pet_id, status, placed_at)
      SELECT i, i, CASE WHEN i % 200 = 0 THEN 'cancelled' ELSE 'placed' END, ${at} ${from};
    ${series} INSERT INTO events (id, type, occurred_at, data)
      SELECT i, CASE WHEN i % 200 = 0 THEN 'order.cancelled' ELSE 'pet.created' END, ${at}, '{}' ${from};
    ${series} INSERT INTO webhook_endpoints (id, url, types, description, status, created_at, secret)
      SELECT i, 'https://example.com/hook', ${sqlite ? "'*'" : "ARRAY['*']"}, '', 'enabled', ${at}, 'secret'
      ${from} WHERE i <= 100;
    ${series} INSERT INTO webhook_deliveries (endpoint_id, event_id, status, attempts)
      SELECT 1 + i % 100, i, CASE WHEN i % 300 = 0 THEN 'failed' ELSE 'succeeded' END, 1 ${from};
    ANALYZE;`;
}

/** Each filter alone, beside what the query requires. */
function cases<Q>(
  filters: Filters<Q>,
  required: Partial<Q>,
): { name: string; query: Q; columns: string[] }[] {
  const keys = Object.keys(filters) as (keyof Filters<Q>)[];
  const base = { ...required, limit: 20 } as Q;
  return keys.map((key) => ({
    name: String(key),
    query: { ...base, [key]: filters[key].value } as Q,
    columns: [filters[key].column],
  }));
}

for (const backend of backends) {
  backend.describe(`list operations read through an index for each filter (${backend.name})`, () => {
    let database: TestDatabase;
    let storage: Storage;
    before(async () => {
      database = await backend.create();
      storage = await database.open();
      await executeSql(database.url, fill(database.url));
    });
    after(async () => {
      await storage?.close();
      await database?.drop();
    });

    const operations: {
      name: string;
      table: string;
      cases: () => { name: string; query: unknown; columns: string[] }[];
      run: (query: never) => unknown;
    }[] = [
      {
        name: 'pets.list',
        table: 'pets',
        cases: () => cases(PET_FILTERS, { afterId: 0n }),
        run: (query: PetListQuery) => storage.pets.list(query),
      },
      {
        name: 'pets.listJson',
        table: 'pets',
        cases: () => cases(PET_FILTERS, { afterId: 0n }),
        run: (query: PetListQuery) => storage.pets.listJson(query),
      },
      {
        name: 'orders.list',
        table: 'orders',
        cases: () => cases(ORDER_FILTERS, { afterId: 0n }),
        run: (query: OrderListQuery) => storage.orders.list(query),
      },
      {
        name: 'events.list',
        table: 'events',
        cases: () => [
          ...cases(EVENT_FILTERS, { afterId: 0n, types: [] }),
          {
            name: 'two types',
            query: { afterId: 0n, types: ['order.cancelled', 'order.delivered'], limit: 20 },
            columns: ['type'],
          },
        ],
        run: (query: EventListQuery) => storage.events.list(query),
      },
      {
        name: 'webhooks.listDeliveries',
        table: 'webhook_deliveries',
        cases: () => [
          ...cases(DELIVERY_FILTERS, { endpointId: 1n }),
          {
            name: 'every filter',
            query: { endpointId: 1n, beforeEventId: 1_000n, status: 'failed', limit: 20 },
            columns: ['endpoint_id', 'status', 'event_id'],
          },
        ],
        run: (query: DeliveryListQuery) => storage.deliveries.listDeliveries(query),
      },
      {
        name: 'webhooks.listEndpoints',
        table: 'webhook_endpoints',
        cases: () => [{ name: 'afterId', query: 0n, columns: ['id'] }],
        run: (afterId: bigint) => storage.webhookEndpoints.listEndpoints(afterId, 20),
      },
    ];

    for (const operation of operations) {
      test(`when ${operation.name} is asked with each of its filters, then its statement reads ${operation.table} through an index whose condition has that filter's column`, async () => {
        for (const { name, query, columns } of operation.cases()) {
          const recording = recordStatements();
          try {
            await operation.run(query as never);
          } finally {
            recording.stop();
          }
          const reads = recording.ran.filter(({ sql }) =>
            new RegExp(`\\bFROM\\s+${operation.table}\\b`, 'i').test(sql),
          );
          assert.ok(reads.length > 0, `${name}: no statement read ${operation.table}`);
          for (const read of reads) {
            const accesses = database.url.startsWith('sqlite:')
              ? sqlitePlan(database.url, read, operation.table)
              : await postgresPlan(database.url, read, operation.table);
            assert.ok(
              accesses.length > 0,
              `${name}: no access to ${operation.table} in the plan of ${read.sql}`,
            );
            for (const access of accesses) {
              for (const column of columns) {
                assert.ok(
                  access.columns.includes(column),
                  `${operation.name} by ${name}: ${access.how} does not use an index on ${column}\n${read.sql}`,
                );
              }
            }
          }
        }
      });
    }
  });
}
