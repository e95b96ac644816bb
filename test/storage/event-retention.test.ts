import assert from 'node:assert/strict';
import { backends, cleanUpInReverse, test } from '../support/backends.js';
import { poll } from '../support/cli.js';
import { queryDatabase } from '../support/db-inspect.js';
import { startTestServer } from '../support/test-server.js';

/** EVENT_RETENTION_DAYS: older events, and their deliveries, are deleted in the background, in bounded batches. */

const DAY = 86_400_000;
const NOW = new Date('2026-11-26T12:00:00.000Z');

for (const backend of backends) {
  backend.describe(`event retention (${backend.name})`, () => {
    test('when events are older than the retention, then deleteOlderThan removes at most a batch at a time, oldest first, with their deliveries, and keeps the rest', async (t) => {
      const database = await backend.create();
      const later = cleanUpInReverse(t);
      later(() => database.drop());
      const storage = await database.open();
      later(() => storage.close());
      const endpoint = await storage.webhookEndpoints.createEndpoint(
        {
          url: 'https://hooks.example.com/r',
          types: ['*'],
          description: '',
          secret: 'whsec_AAAA',
          createdAt: new Date(NOW.getTime() - 40 * DAY),
        },
        100,
      );
      assert.ok(endpoint);
      for (const daysAgo of [40, 35, 31, 29, 1])
        await storage.pets.create({
          pet: { name: `${daysAgo} days ago`, categoryId: 1n, status: 'available' },
          at: new Date(NOW.getTime() - daysAgo * DAY),
        });
      assert.equal(await storage.deliveries.fanOut(100), 5);
      const deliveries = async () =>
        (
          await queryDatabase(
            database.url,
            `SELECT event_id FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id}`,
          )
        ).length;
      assert.equal(await deliveries(), 5);
      const cutoff = new Date(NOW.getTime() - 30 * DAY);
      assert.equal(await storage.events.deleteOlderThan(cutoff, 2), 2);
      const left = await storage.events.list({ afterId: 0n, types: [], limit: 10 });
      assert.deepEqual(
        left.map((e) => JSON.parse(e.data).name),
        ['31 days ago', '29 days ago', '1 days ago'],
      );
      assert.equal(await deliveries(), 3);
      assert.equal(await storage.events.deleteOlderThan(cutoff, 2), 1);
      assert.equal(await storage.events.deleteOlderThan(cutoff, 2), 0);
      assert.equal(await storage.events.count(), 2);
      assert.equal(await deliveries(), 2);
    });

    test('when a node starts with EVENT_RETENTION_DAYS=30 and older events exist, then they are deleted in the background and newer ones kept', async (t) => {
      const database = await backend.create();
      const later = cleanUpInReverse(t);
      later(() => database.drop());
      const storage = await database.open();
      for (const daysAgo of [45, 31, 30.5, 2])
        await storage.pets.create({
          pet: { name: `${daysAgo}`, categoryId: 1n, status: 'available' },
          at: new Date(NOW.getTime() - daysAgo * DAY),
        });
      await storage.close();
      const server = await startTestServer({ database, now: () => NOW, env: { EVENT_RETENTION_DAYS: '30' } });
      later(() => server.close());
      const names = await poll('old events to be deleted', async () => {
        const events = (await server.request('GET', '/v1/events')).json<{ data: { name: string } }[]>();
        return events.length === 1 ? events.map((e) => e.data.name) : undefined;
      });
      assert.deepEqual(names, ['2']);
    });
  });
}
