import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type { Storage } from '../../src/domain/storage.js';
import type { AttemptOutcome, ClaimedDelivery, NewWebhookEndpoint } from '../../src/domain/webhooks.js';
import { type Backend, backends, cleanUpInReverse, type TestDatabase, test } from '../support/backends.js';
import { executeSql, queryDatabase } from '../support/db-inspect.js';

/**
 * The fan-out, through the storage port on each backend: which endpoints get which events, and what
 * the pending figures say before the fan-out has reached an event.
 */
const endpoint = (url: string, types: NewWebhookEndpoint['types'] = ['*']): NewWebhookEndpoint => ({
  url,
  types,
  description: '',
  secret: 'whsec_AAAA',
  createdAt: new Date(),
});
const AT = new Date('2026-11-28T12:00:00.000Z');

async function createPets(storage: Storage, names: string[]): Promise<void> {
  for (const [i, name] of names.entries())
    await storage.pets.create({
      pet: { name, categoryId: 1n, status: 'available' },
      at: new Date(AT.getTime() + i),
    });
}

async function pairs(url: string): Promise<string[]> {
  const rows = await queryDatabase<{ endpoint_id: unknown; event_id: unknown }>(
    url,
    'SELECT endpoint_id, event_id FROM webhook_deliveries ORDER BY endpoint_id, event_id',
  );
  return rows.map((r) => `${r.endpoint_id}:${r.event_id}`);
}

/** A new database on `backend` and its storage, both gone when the test ends. */
async function fresh(
  t: TestContext,
  backend: Backend,
): Promise<{ database: TestDatabase; storage: Storage }> {
  const later = cleanUpInReverse(t);
  const database = await backend.create();
  later(() => database.drop());
  const storage = await database.open();
  later(() => storage.close());
  return { database, storage };
}

for (const backend of backends) {
  backend.describe(`fanning out deliveries from the events (${backend.name})`, () => {
    test('when events commit, then they have no deliveries until the fan-out, the oldest pending age counts them meanwhile, and the fan-out gives each matching endpoint one delivery per event after it', async (t) => {
      const { database, storage } = await fresh(t, backend);
      const all = await storage.webhookEndpoints.createEndpoint(endpoint('https://a.example/'), 10);
      const orders = await storage.webhookEndpoints.createEndpoint(
        endpoint('https://b.example/', ['order.placed']),
        10,
      );
      assert.ok(all && orders);
      await createPets(storage, ['one', 'two']);
      const late = await storage.webhookEndpoints.createEndpoint(endpoint('https://c.example/'), 10);
      assert.ok(late);
      await createPets(storage, ['three']);

      assert.deepEqual(await pairs(database.url), []);
      const waiting = await storage.deliveries.pending();
      assert.equal(waiting.count, 0);
      assert.equal(waiting.oldestAt?.toISOString(), AT.toISOString());

      assert.equal(await storage.deliveries.fanOut(2), 2);
      assert.equal(await storage.deliveries.fanOut(2), 1);
      assert.equal(await storage.deliveries.fanOut(2), 0);
      // `all` gets the three pet.created, `orders` none of them, `late` only the one after it.
      assert.deepEqual(await pairs(database.url), [
        `${all.id}:1`,
        `${all.id}:2`,
        `${all.id}:3`,
        `${late.id}:3`,
      ]);
      assert.equal((await storage.deliveries.pending()).count, 4);
    });

    test('when an endpoint is disabled and enabled again, then it gets the events after it was enabled, not those meanwhile; with no endpoint enabled the fan-out skips every event', async (t) => {
      const { database, storage } = await fresh(t, backend);
      const hook = await storage.webhookEndpoints.createEndpoint(endpoint('https://a.example/'), 10);
      assert.ok(hook);
      await executeSql(
        database.url,
        `UPDATE webhook_endpoints SET status = 'disabled' WHERE id = ${hook.id}`,
      );
      await createPets(storage, ['while disabled', 'also while disabled']);
      assert.equal(await storage.deliveries.fanOut(100), 0, 'nothing to fan out to: the cursor moves past');
      assert.equal((await storage.deliveries.pending()).oldestAt, undefined);
      await storage.webhookEndpoints.enableEndpoint(hook.id);
      await createPets(storage, ['after enabling']);
      await storage.deliveries.fanOut(100);
      assert.deepEqual(await pairs(database.url), [`${hook.id}:3`]);
      // Enabling an endpoint that is enabled already loses nothing it was owed.
      await createPets(storage, ['owed']);
      await storage.webhookEndpoints.enableEndpoint(hook.id);
      await storage.deliveries.fanOut(100);
      assert.deepEqual(await pairs(database.url), [`${hook.id}:3`, `${hook.id}:4`]);
    });

    test('when events are imported (migrate-data), then the fan-out starts after them: they are not delivered again', async (t) => {
      const { database, storage } = await fresh(t, backend);
      const hook = await storage.webhookEndpoints.createEndpoint(endpoint('https://a.example/'), 10);
      assert.ok(hook);
      await storage.events.importBatch(
        [5n, 6n].map((id) => ({ id, type: 'pet.created' as const, occurredAt: AT, data: '{}' })),
      );
      assert.equal(await storage.deliveries.fanOut(100), 0);
      assert.deepEqual(await pairs(database.url), []);
    });

    test('when one endpoint has a backlog and another has waited longer, then a claim with room for one takes the one that waited longest, whatever the ids; each endpoint is claimed only by one claimer at a time', async (t) => {
      const { database, storage } = await fresh(t, backend);
      const busy = await storage.webhookEndpoints.createEndpoint(endpoint('https://busy.example/'), 10);
      const quiet = await storage.webhookEndpoints.createEndpoint(endpoint('https://quiet.example/'), 10);
      assert.ok(busy && quiet && busy.id < quiet.id);
      await createPets(storage, ['a', 'b', 'c', 'd']);
      while ((await storage.deliveries.fanOut(100)) > 0);
      // The quiet endpoint's one delivery has waited a minute; the busy one's four, a second.
      const sqlite = backend.name === 'sqlite';
      const ago = (ms: number) =>
        sqlite ? String(Date.now() - ms) : `now() - interval '${ms} milliseconds'`;
      await executeSql(
        database.url,
        `UPDATE webhook_deliveries SET next_attempt_at = ${ago(1_000)} WHERE endpoint_id = ${busy.id};
         DELETE FROM webhook_deliveries WHERE endpoint_id = ${quiet.id} AND event_id <> (
           SELECT min(event_id) FROM webhook_deliveries WHERE endpoint_id = ${quiet.id});
         UPDATE webhook_deliveries SET next_attempt_at = ${ago(60_000)} WHERE endpoint_id = ${quiet.id}`,
      );
      const now = new Date();
      const limits = (owner: string) => ({
        limit: 1,
        perEndpoint: 4,
        owner,
        depths: new Map<bigint, number>(),
      });
      const first = await storage.deliveries.claimDue(now, new Date(now.getTime() + 15_000), limits('one'));
      assert.deepEqual(
        first.deliveries.map((d) => d.endpointId),
        [quiet.id],
        'the longest wait first, not the lowest id',
      );
      // Claims racing from several processes: no delivery leased twice, the bound of 4 kept.
      const claims = await Promise.all(
        ['two', 'three', 'four', 'five'].map((owner) =>
          storage.deliveries.claimDue(now, new Date(now.getTime() + 15_000), { ...limits(owner), limit: 8 }),
        ),
      );
      const leased = claims.flatMap((c) => c.deliveries.map((d) => `${d.endpointId}/${d.eventId}`));
      assert.equal(new Set(leased).size, leased.length, 'none leased twice');
      assert.equal(leased.length, 4, "the busy endpoint's four, once each");
    });

    test("when a throttled endpoint is claimed by a node whose `now` is older than the last claim's (read a moment before that one ran), then the bucket refills nothing for it, and that moment is not refilled again at the next claim", async (t) => {
      const { storage } = await fresh(t, backend);
      const hook = await storage.webhookEndpoints.createEndpoint(
        { ...endpoint('https://throttled.example/'), rateLimit: 10 },
        10,
      );
      assert.ok(hook);
      await createPets(
        storage,
        Array.from({ length: 30 }, (_, i) => `pet ${i}`),
      );
      while ((await storage.deliveries.fanOut(100)) > 0);
      const start = Date.now();
      const claim = async (afterMs: number, limit: number) => {
        const now = new Date(start + afterMs);
        const owner = `node at ${afterMs}`;
        const claimed = await storage.deliveries.claimDue(now, new Date(now.getTime() + 15_000), {
          limit,
          perEndpoint: 30,
          owner,
          depths: new Map<bigint, number>(),
        });
        return claimed.deliveries.length;
      };
      assert.equal(await claim(0, 30), 10, 'a full bucket: its burst of 10');
      assert.equal(await claim(500, 1), 1, 'half a second refills 5: one taken, 4 left');
      assert.equal(await claim(300, 1), 1, 'an older now refills nothing: one taken of the 4, 3 left');
      // Had the older claim moved the bucket's time back to 300 ms, this one would refill 200 ms again: 5.
      assert.equal(await claim(500, 30), 3, 'at 500 ms again: the 3 left, nothing refilled');
    });

    test('when a claim leases deliveries, then each carries its endpoint, secrets and event body; once its lease has passed on to a later claim, its success records nothing and says so, and the later one records', async (t) => {
      const { database, storage } = await fresh(t, backend);
      const hook = await storage.webhookEndpoints.createEndpoint(endpoint('https://a.example/'), 10);
      assert.ok(hook);
      await createPets(storage, ['one', 'two']);
      while ((await storage.deliveries.fanOut(100)) > 0);
      const limits = (owner: string) => ({
        limit: 8,
        perEndpoint: 4,
        owner,
        depths: new Map<bigint, number>(),
      });
      const now = new Date();
      const leaseUntil = new Date(now.getTime() + 15_000);
      const first = await storage.deliveries.claimDue(now, leaseUntil, limits('one'));
      assert.deepEqual(
        first.deliveries.map((d) => ({
          endpointId: d.endpointId,
          url: d.url,
          secrets: d.secrets,
          attempts: d.attempts,
          trigger: d.trigger,
          eventType: d.eventType,
          occurredAt: d.occurredAt.toISOString(),
          leaseUntil: d.leaseUntil.toISOString(),
          body: JSON.parse(d.body),
        })),
        ['one', 'two'].map((name, i) => ({
          endpointId: hook.id,
          url: 'https://a.example/',
          secrets: ['whsec_AAAA'],
          attempts: 0,
          trigger: 'schedule',
          eventType: 'pet.created',
          occurredAt: new Date(AT.getTime() + i).toISOString(),
          leaseUntil: leaseUntil.toISOString(),
          body: {
            id: Number(first.deliveries[i]?.eventId),
            type: 'pet.created',
            occurredAt: new Date(AT.getTime() + i).toISOString(),
            data: { id: i + 1, name, categoryId: 1, status: 'available' },
          },
        })),
      );
      // The lease ends (its process died, say): a claim after it takes both again.
      const later = new Date(leaseUntil.getTime() + 1_000);
      const second = await storage.deliveries.claimDue(
        later,
        new Date(later.getTime() + 15_000),
        limits('two'),
      );
      assert.deepEqual(
        second.deliveries.map((d) => d.eventId),
        first.deliveries.map((d) => d.eventId),
      );
      const success = (at: Date): AttemptOutcome => ({
        at,
        startedAt: at,
        durationMs: 3,
        responseBody: 'ok',
        noAnswer: undefined,
        succeeded: true,
        responseStatus: 200,
        error: undefined,
        nextAttemptAt: undefined,
        gone: false,
      });
      const record = (deliveries: ClaimedDelivery[], at: Date) =>
        Promise.all(deliveries.map((d) => storage.deliveries.recordAttempt(d, success(at), new Date(0))));
      assert.deepEqual(await record(first.deliveries, now), [{ recorded: false }, { recorded: false }]);
      assert.deepEqual(await record(second.deliveries, later), [
        { recorded: true, disabled: undefined, failed: false },
        { recorded: true, disabled: undefined, failed: false },
      ]);
      const rows = await queryDatabase<{ status: string; attempts: unknown; kept: unknown }>(
        database.url,
        `SELECT d.status, d.attempts, (SELECT count(*) FROM webhook_attempts a
           WHERE a.endpoint_id = d.endpoint_id AND a.event_id = d.event_id) AS kept
         FROM webhook_deliveries d ORDER BY d.event_id`,
      );
      assert.deepEqual(
        rows.map((r) => [r.status, Number(r.attempts), Number(r.kept)]),
        [
          ['succeeded', 1, 1],
          ['succeeded', 1, 1],
        ],
      );
    });
  });
}
