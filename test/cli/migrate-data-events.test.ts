import assert from 'node:assert/strict';
import { after, backends, before, sqlite, type TestDatabase, test } from '../support/backends.js';
import { runInProcess } from '../support/cli.js';

/**
 * migrate-data carries the event log (ids, instants and data kept) and webhook endpoints (secrets, a
 * rotation's previous secret, status) to the target, and a second run copies nothing twice.
 */

for (const backend of backends) {
  backend.describe(
    `petstore migrate-data with events and webhook endpoints, SQLite to ${backend.name}`,
    () => {
      let source: TestDatabase;
      let target: TestDatabase;
      before(async () => {
        source = await sqlite.create();
        target = await backend.create();
        const storage = await source.open();
        for (let i = 0; i < 25; i++)
          await storage.pets.create({
            pet: { name: `evented ${i}`, categoryId: BigInt(i), status: 'available' },
            at: new Date(Date.UTC(2026, 10, 1, 0, 0, i, i)),
          });
        const placed = await storage.orders.place({ petId: 3n, at: new Date('2026-11-02T00:00:00.123Z') });
        assert.equal(placed.outcome, 'placed');
        const endpoint = await storage.webhookEndpoints.createEndpoint(
          {
            url: 'https://hooks.example.com/copied',
            types: ['order.placed', 'pet.created'],
            description: 'copied with its secret',
            secret: 'whsec_c2VjcmV0LW9uZS1zZWNyZXQtb25lLXNlY3JldC1vbmUhISE=',
            createdAt: new Date('2026-10-31T00:00:00.000Z'),
          },
          100,
        );
        assert.ok(endpoint);
        await storage.webhookEndpoints.rotateSecret(
          endpoint.id,
          'whsec_bmV3LXNlY3JldC1uZXctc2VjcmV0LW5ldy1zZWNyZXQhISEhISE=',
          new Date('2026-11-03T00:00:00.000Z'),
        );
        await storage.close();
      });
      after(async () => {
        await source.drop();
        await target.drop();
      });

      test('when copied, then every event and endpoint arrives unchanged, a re-run writes none again, and new events come after the copied ones', async () => {
        const run = await runInProcess([
          'migrate-data',
          '--from',
          source.url,
          '--to',
          target.url,
          '--batch-size',
          '10',
        ]);
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stderr, /^events: 26 of 26 read \(100%\), 26 written, 0 already there$/m);
        assert.match(run.stderr, /^webhook endpoints: 1 of 1 read \(100%\), 1 written, 0 already there$/m);
        const [from, to] = [await source.open(), await target.open()];
        try {
          const all = (s: typeof from) => s.events.list({ afterId: 0n, types: [], limit: 100 });
          assert.deepEqual(await all(to), await all(from));
          assert.deepEqual(
            await to.webhookEndpoints.listEndpoints(0n, 10),
            await from.webhookEndpoints.listEndpoints(0n, 10),
          );
          const again = await runInProcess(['migrate-data', '--from', source.url, '--to', target.url]);
          assert.equal(again.code, 0, again.stderr);
          assert.match(again.stderr, /^events: 26 of 26 read \(100%\), 0 written, 26 already there$/m);
          assert.match(
            again.stderr,
            /^webhook endpoints: 1 of 1 read \(100%\), 0 written, 1 already there$/m,
          );
          await to.pets.create({ pet: { name: 'after the move', categoryId: 1n, status: 'available' } });
          const events = await all(to);
          assert.equal(events.length, 27);
          assert.equal(events[26]?.type, 'pet.created');
          assert.ok((events[26]?.id ?? 0n) > (events[25]?.id ?? 0n));
        } finally {
          await from.close();
          await to.close();
        }
      });
    },
  );
}
