import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { CLAIM, FAN_OUT } from '../../src/storage/postgres/delivery-statements.js';
import { deliveryStatementTexts } from '../../src/storage/sqlite/delivery-statements.js';
import { BetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import { migrate } from '../../src/storage/sqlite/migrations.js';
import { postgres } from '../support/backends.js';
import { explain, planNodes } from '../support/query-plans.js';

/** Arguments to bind for each statement's plan: a statement added without one fails the test. */
const ARGUMENTS: Record<string, unknown[]> = {
  leasedByEndpoint: ['owner', 1],
  dueEndpoints: [1],
  throttled: [1.5, 1, 1n],
  dueOfEndpoint: [1n, 1, 8],
  lease: [{ until: 1, owner: 'owner', endpointId: 1n, eventId: 1n }],
  record: [
    {
      status: 'delivered',
      at: 1,
      next: null,
      responseStatus: 204,
      error: null,
      endpointId: 1n,
      eventId: 1n,
      lease: 1,
    },
  ],
  attempt: [
    {
      endpointId: 1n,
      eventId: 1n,
      number: 1,
      startedAt: 1,
      durationMs: 1,
      responseStatus: 204,
      responseBody: '',
      noAnswer: null,
      trigger: 'schedule',
    },
  ],
  succeeded: [{ at: 1, endpointId: 1n }],
  failing: [1, 1n],
  disable: ['gone', 1n],
  endPending: [{ endpointId: 1n, at: 1 }],
  release: [1, 1n, 1n, 1],
  nextDue: [],
  anyRecovery: [],
  endpointStatus: [1n],
  recoveryOf: [1n],
  failedInWindow: [1n, 0, 1],
  recoveryStarted: [1n, 0, 1, 1],
  recoveries: [],
  recoverable: [1n, 0n, 0n, 1n, 100],
  recovered: [{ at: 1, endpointId: 1n, eventId: 1n }],
  recoveredTo: [1n, 1n],
  recovering: [1n],
  recoveryDone: [1n],
  fanOutFrom: [],
  fanOutTo: [0n, 100],
  fanOut: [{ from: 0n, to: 100n }],
  fannedOutTo: [1n],
  anyEnabled: [],
  skipFanOut: [],
};

test('when deliveries are claimed, attempted and recorded on SQLite, then no statement of the delivery loop reads the whole deliveries table or its pending index (each is an index search, whatever the backlog)', () => {
  const db = new BetterSqlite3(':memory:');
  migrate(db);
  db.exec(`INSERT INTO webhook_endpoints (id, url, types, description, status, created_at, secret)
           VALUES (1, 'https://example.com/hook', '*', '', 'enabled', 0, 'secret')`);
  // A backlog: 5,000 pending deliveries, a few of them leased.
  db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
           INSERT INTO webhook_deliveries (endpoint_id, event_id, status, attempts, next_attempt_at, lease_until)
           SELECT 1, i, 'pending', 0, i, CASE WHEN i <= 4 THEN 10000 END FROM n`);
  const statements = deliveryStatementTexts(db);
  assert.deepEqual(Object.keys(ARGUMENTS).sort(), Object.keys(statements).sort());
  const plans = Object.entries(statements).map(([name, sql]) => {
    const plan = db
      .prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
      .all(...(ARGUMENTS[name] ?? []))
      .map((row) => row.detail);
    return { name, plan };
  });
  // A SCAN of the deliveries (with or without an index) grows with the backlog; a SEARCH does not.
  const scans = plans.filter(({ plan }) => plan.some((step) => /^SCAN (webhook_deliveries|d)\b/.test(step)));
  assert.deepEqual(scans, []);
  // And the plans read are real ones: the lease count goes through the leases' own index.
  assert.match(
    plans.find(({ name }) => name === 'leasedByEndpoint')?.plan.join(' | ') ?? '',
    /SEARCH webhook_deliveries USING INDEX webhook_deliveries_leased \(lease_until>\?\)/,
  );
  db.close();
});

/** A fresh PostgreSQL schema, migrated, and a client on it, for `work`; dropped after. */
async function onPostgres(work: (client: pg.Client) => Promise<void>): Promise<void> {
  const database = await postgres.create();
  const storage = await database.open(); // migrates
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    await work(client);
  } finally {
    await client.end();
    await storage.close();
    await database.drop();
  }
}

test(
  "when the deliveries grew far past what PostgreSQL's statistics say, then a claim's plan still finds the due ones by index and leases them by row address, never reading the endpoint's other deliveries",
  {
    skip: postgres.unavailable ?? false,
  },
  () =>
    onPostgres(async (client) => {
      // Statistics taken when the table held three rows, then a backlog: a new deployment's first burst.
      await client.query(`INSERT INTO webhook_endpoints (id, url, types, description, status, created_at, secret)
                        VALUES (1, 'https://example.com/hook', '{*}', '', 'enabled', now(), 'secret')`);
      await client.query(`INSERT INTO webhook_deliveries (endpoint_id, event_id, status, attempts)
                        SELECT 1, -i, 'succeeded', 1 FROM generate_series(1, 3) i`);
      await client.query('ANALYZE webhook_deliveries');
      await client.query(`INSERT INTO webhook_deliveries (endpoint_id, event_id, status, attempts, next_attempt_at)
                        SELECT 1, i, 'pending', 0, now() - interval '1 minute' FROM generate_series(1, 20000) i`);
      const plan = await explain(client, CLAIM, [
        new Date(),
        'owner',
        new Date(Date.now() + 15_000),
        128,
        10,
        [1],
        [128],
      ]);
      const scans = planNodes(plan)
        .filter(
          (node) => node['Relation Name'] === 'webhook_deliveries' && node['Node Type'] !== 'ModifyTable',
        )
        .map((node) => `${node['Node Type']} ${node['Index Name'] ?? ''}`.trim());
      // The due ones by the endpoint's index, leased by row address; the endpoint's oldest due, its live
      // leases and the next due after the claim each by an index: nothing reads the table through.
      assert.ok(scans.includes('Index Scan webhook_deliveries_endpoint_due'), scans.join(', '));
      assert.ok(scans.includes('Tid Scan'), scans.join(', '));
      assert.deepEqual(
        scans.filter((scan) => !/^(Index Scan|Index Only Scan|Tid Scan) /.test(`${scan} `)),
        [],
        'no sequential or bitmap scan of the deliveries',
      );
    }),
);

test(
  'when many events were fanned out already on PostgreSQL, then a fan-out reads the events from its cursor on, not from the first event',
  {
    skip: postgres.unavailable ?? false,
  },
  () =>
    onPostgres(async (client) => {
      await client.query(`INSERT INTO events (type, occurred_at, data)
                        SELECT 'pet.created', now(), '{}' FROM generate_series(1, 20000)`);
      await client.query('UPDATE webhook_fanout SET last_event_id = 19900');
      await client.query('ANALYZE events');
      // The batch: the events after the cursor, by the primary key from the cursor's value on.
      const batch = planNodes(await explain(client, FAN_OUT, [100])).filter(
        (node) => node['Relation Name'] === 'events' && node['Index Name'] === 'events_pkey',
      );
      assert.ok(
        batch.some((node) => /\(id > \$\d+\)/.test(node['Index Cond'] ?? '')),
        JSON.stringify(batch.map((node) => [node['Node Type'], node['Index Cond']])),
      );
    }),
);
