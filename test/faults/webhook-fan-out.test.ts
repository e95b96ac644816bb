import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { BetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import {
  CliProcess,
  killAllCliProcesses,
  poll,
  type ServeProcess,
  startServe,
  tempDatabase,
} from '../support/cli.js';

after(killAllCliProcesses);

/**
 * Deliveries fan out from the events after the change's own transaction, a batch of events per
 * transaction. A node killed (SIGKILL) in the middle of a fan-out loses nothing: the batch it was
 * writing rolls back with its cursor, and the next node (here, the same restarted) writes it again.
 * Events of now (retention would delete older ones). The endpoints point at a private address, so each attempt fails at once, without a connection: the
 * deliveries stay in the table to be counted.
 */
const ENDPOINTS = 10;
const EVENTS = 2_000;
const TOTAL = ENDPOINTS * EVENTS;

test(`when a node is killed in the middle of fanning out ${EVENTS} events to ${ENDPOINTS} endpoints, then once it is back every event has its delivery to every endpoint, once`, async () => {
  const database = tempDatabase();
  const ENV = { DATABASE_URL: database.url, PETSTORE_API_KEYS: 'fan-out-key-0123456789abcdef', PORT: '0' };
  const serveIt = () => startServe(ENV, { stdout: 'drain' });
  let first: ServeProcess | undefined = await serveIt(); // migrates the new file
  await first.stop();
  first = undefined;
  const db = new BetterSqlite3(database.path);
  try {
    // Endpoints first (they get every event after them), then the events, as changes would write them;
    // no node runs meanwhile, so the fan-out is all to come.
    db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ENDPOINTS})
             INSERT INTO webhook_endpoints (url, types, description, status, created_at, secret, deliver_after)
             SELECT 'http://10.0.0.1/hook/' || i, '*', '', 'enabled', 0, 'whsec_AAAA', 0 FROM n`);
    db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${EVENTS})
             INSERT INTO events (type, occurred_at, data) SELECT 'pet.created', ${Date.now()}, '{}' FROM n`);
    const count = () =>
      Number(db.prepare<[], number>('SELECT count(*) FROM webhook_deliveries').pluck().get());

    // Watched from the moment it starts: the fan-out begins before the node says it listens.
    const node = new CliProcess(['serve'], ENV, { stdout: 'ignore' });
    const atKill = await poll('the fan-out to be under way', () => {
      const n = count();
      return n > 0 ? n : undefined;
    });
    node.signal('SIGKILL');
    await node.exited;
    assert.ok(atKill < TOTAL, `the fan-out had finished (${atKill}) before the kill: nothing was cut`);

    const restarted = await serveIt();
    try {
      await poll(`${TOTAL} deliveries`, () => (count() >= TOTAL ? true : undefined));
    } finally {
      await restarted.stop();
    }
    assert.equal(count(), TOTAL);
    const [pairs] = db
      .prepare<[], [number, number]>(
        'SELECT count(DISTINCT endpoint_id), count(DISTINCT event_id) FROM webhook_deliveries',
      )
      .raw()
      .all();
    assert.deepEqual(pairs, [ENDPOINTS, EVENTS]);
  } finally {
    db.close();
    database.remove();
  }
});
