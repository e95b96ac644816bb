import assert from 'node:assert/strict';
import { newApiKey } from '../../src/domain/api-keys.js';
import { after, backends, before, test } from '../support/backends.js';
import { assertError } from '../support/error-body.js';
import { addAnimal, placeOrder } from '../support/orders.js';
import { nextHref, toPath, walkLinks } from '../support/paging.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

/**
 * The event feed through HTTP: every change made through the API records exactly one event, in commit
 * order, with the resource as the API returned it; a request that changes nothing records nothing;
 * listEvents and getEvent are as strict as every other operation.
 */

interface EventBody {
  id: number;
  type: string;
  occurredAt: string;
  data: Record<string, unknown>;
}

const RFC3339_MS_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

for (const backend of backends) {
  backend.describe(`events (${backend.name})`, () => {
    let server: TestServer;
    let clock = new Date('2026-11-26T10:00:00.000Z');
    before(async () => {
      server = await startTestServer({ backend, now: () => clock });
    });
    after(() => server.close());

    /** The events after `after`, every page followed. */
    const eventsAfter = async (after: number, query = ''): Promise<EventBody[]> => {
      const pages = await walkLinks(`/v1/events?limit=100&after=${after}${query}`, (path) =>
        server.request('GET', path),
      );
      return pages.flatMap((page) => page.json<EventBody[]>());
    };
    const lastId = async () => {
      const all = await eventsAfter(0);
      return all.length === 0 ? 0 : (all[all.length - 1] as EventBody).id;
    };

    test('when a pet is created, an order placed, delivered, and another cancelled, then exactly those four events follow, in order, each with the resource as the API returned it', async () => {
      const start = await lastId();
      clock = new Date('2026-11-26T10:00:01.234Z');
      const created = await server.request('POST', '/v1/pets', { body: { name: 'Eventful', categoryId: 7 } });
      assert.equal(created.status, 201);
      const petId = created.json<{ id: number }>().id;
      clock = new Date('2026-11-26T10:00:02.000Z');
      const placed = await placeOrder(server, petId);
      clock = new Date('2026-11-26T10:00:03.500Z');
      const delivered = await server.request('POST', `/v1/store/orders/${placed.id}/deliver`);
      assert.equal(delivered.status, 200);
      const other = await addAnimal(server);
      const second = await placeOrder(server, other);
      clock = new Date('2026-11-26T10:00:04.000Z');
      const cancelled = await server.request('POST', `/v1/store/orders/${second.id}/cancel`);
      assert.equal(cancelled.status, 200);

      const events = await eventsAfter(start);
      assert.deepEqual(
        events.map((e) => [e.type, e.occurredAt]),
        [
          ['pet.created', '2026-11-26T10:00:01.234Z'],
          ['order.placed', '2026-11-26T10:00:02.000Z'],
          ['order.delivered', '2026-11-26T10:00:03.500Z'],
          ['pet.created', '2026-11-26T10:00:03.500Z'],
          ['order.placed', '2026-11-26T10:00:03.500Z'],
          ['order.cancelled', '2026-11-26T10:00:04.000Z'],
        ],
      );
      for (const [i, event] of events.entries()) {
        assert.deepEqual(Object.keys(event), ['id', 'type', 'occurredAt', 'data']);
        assert.match(event.occurredAt, RFC3339_MS_UTC);
        if (i > 0) assert.ok(event.id > (events[i - 1] as EventBody).id, 'ids ascend');
      }
      assert.deepEqual(events[0]?.data, created.json());
      assert.deepEqual(events[1]?.data, placed);
      assert.deepEqual(events[2]?.data, delivered.json());
      assert.deepEqual(events[5]?.data, cancelled.json());
      // getEvent answers each one exactly as the feed lists it, byte for byte.
      const feedText = (await server.request('GET', `/v1/events?after=${start}&limit=1`)).text;
      const one = await server.request('GET', `/v1/events/${events[0]?.id}`);
      assert.equal(one.status, 200);
      assert.equal(`[${one.text}]`, feedText);
    });

    test('when a request changes nothing (a refusal, a repeated deliver or cancel, an idempotent replay, a validation error), then no event is recorded', async () => {
      const petId = await addAnimal(server);
      const order = await placeOrder(server, petId);
      assert.equal((await server.request('POST', `/v1/store/orders/${order.id}/deliver`)).status, 200);
      const start = await lastId();

      assert.equal((await server.request('POST', `/v1/store/orders/${order.id}/deliver`)).status, 200); // repeated
      assert.equal((await server.request('POST', `/v1/store/orders/${order.id}/cancel`)).status, 409);
      assert.equal((await server.request('POST', '/v1/store/orders', { body: { petId } })).status, 409);
      assert.equal(
        (await server.request('POST', '/v1/store/orders', { body: { petId: 987654321 } })).status,
        400,
      );
      assert.equal((await server.request('POST', '/v1/pets', { body: { name: '' } })).status, 400);
      const keyed = {
        headers: { 'idempotency-key': `events-${petId}` },
        body: { name: 'Once', categoryId: 1 },
      };
      assert.equal((await server.request('POST', '/v1/pets', keyed)).status, 201);
      const afterFirst = await lastId();
      assert.equal(afterFirst, start + 1, 'the first keyed create records one event');
      const replay = await server.request('POST', '/v1/pets', keyed);
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(await eventsAfter(afterFirst), [], 'nothing after the replay');
    });

    test('when listed with type filters (repeated), after and limit, then only those types, only greater ids, pages linked with rel="next" keeping the filters, and the last page has no link', async () => {
      const start = await lastId();
      for (let i = 0; i < 3; i++) {
        const petId = await addAnimal(server);
        const order = await placeOrder(server, petId);
        await server.request('POST', `/v1/store/orders/${order.id}/${i === 1 ? 'cancel' : 'deliver'}`);
      }
      const all = await eventsAfter(start);
      assert.equal(all.length, 9);
      const firstPage = await server.request(
        'GET',
        `/v1/events?type=order.placed&type=order.cancelled&after=${start}&limit=2`,
      );
      assert.equal(firstPage.status, 200);
      const href = nextHref(firstPage);
      assert.ok(href, 'a full page links the next');
      assert.equal(
        href,
        `/v1/events?limit=2&type=order.placed&type=order.cancelled&after=${firstPage.json<EventBody[]>()[1]?.id}`,
      );
      const filtered = await eventsAfter(start, '&type=order.placed&type=order.cancelled');
      assert.deepEqual(
        filtered.map((e) => e.id),
        all.filter((e) => e.type === 'order.placed' || e.type === 'order.cancelled').map((e) => e.id),
      );
      const single = await eventsAfter(start, '&type=order.cancelled');
      assert.deepEqual(
        single.map((e) => e.type),
        ['order.cancelled'],
      );
      const second = await server.request('GET', toPath(href));
      assert.ok(second.json<EventBody[]>().every((e) => e.id > (firstPage.json<EventBody[]>()[1]?.id ?? 0)));
      // Past the last event: an empty array and no link.
      const end = await server.request('GET', `/v1/events?after=${all[all.length - 1]?.id}`);
      assert.equal(end.status, 200);
      assert.equal(end.text, '[]');
      assert.equal(end.headers.get('link'), null);
    });

    test('when the feed or an event is asked for wrongly, then a 400 names the parameter (or 404 for an id no event has)', async () => {
      for (const [query, name] of [
        ['limit=0', 'limit'],
        ['limit=101', 'limit'],
        ['limit=x', 'limit'],
        ['type=pet.deleted', 'type'],
        ['type=', 'type'],
        ['after=-1', 'after'],
        ['after=1.5', 'after'],
        ['after=9223372036854775808', 'after'],
        ['cursor=abc', 'cursor'],
        ['stauts=placed', 'stauts'],
      ] as const) {
        assertError(
          await server.request('GET', `/v1/events?${query}`),
          400,
          'invalid_request',
          { names: [name] },
          query,
        );
      }
      assertError(await server.request('GET', '/v1/events/0'), 400, 'invalid_request', {
        names: ['eventId'],
      });
      assertError(await server.request('GET', '/v1/events/abc'), 400, 'invalid_request', {
        names: ['eventId'],
      });
      assertError(
        await server.request('GET', '/v1/events/9223372036854775807'),
        404,
        'not_found',
        'no event has this id',
      );
      assertError(await server.request('DELETE', '/v1/events'), 405, 'method_not_allowed');
    });

    test('when a key lacks events:read, then listEvents and getEvent are 403 naming the scope', async () => {
      const narrow = newApiKey('no events', new Date(), { scopes: ['pets:read', 'pets:write'] });
      await server.storage.apiKeys.insert(narrow.record);
      for (const path of ['/v1/events', '/v1/events/1']) {
        const res = await server.request('GET', path, { key: narrow.secret });
        assertError(
          res,
          403,
          'forbidden',
          'this API key does not have the scope events:read, which this operation needs',
        );
      }
    });
  });
}
