import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EventFeed } from '../../src/domain/event-feed.js';
import {
  type EventListQuery,
  type EventStore,
  eventJson,
  isEventType,
  orderChanged,
  petCreated,
  type StoredEvent,
} from '../../src/domain/events.js';

/** A name that breaks JSON written by hand: a quote, a backslash, a line break, a control and a non-ASCII character. */
const AWKWARD = 'Rex "the \\ dog"\nsecond line\t\u0001 ü';
const AT = new Date('2026-11-28T10:00:00.000Z');

test('when a pet’s name has a quote, a backslash and a line break, then its event’s data and the Event (the webhook body) parse, with the name intact', () => {
  const event = petCreated(
    { id: 9_007_199_254_740_993n, name: AWKWARD, categoryId: 3n, status: 'available' },
    AT,
    'tp',
  );
  assert.deepEqual(
    { type: event.type, occurredAt: event.occurredAt, cause: event.cause },
    { type: 'pet.created', occurredAt: AT, cause: 'tp' },
  );
  assert.equal(
    event.data,
    `{"id":9007199254740993,"name":${JSON.stringify(AWKWARD)},"categoryId":3,"status":"available"}`,
    'int64 ids written exactly',
  );
  assert.deepEqual(JSON.parse(event.data), {
    id: 9007199254740992,
    name: AWKWARD,
    categoryId: 3,
    status: 'available',
  });
  // The body of every webhook delivery, and what getEvent answers.
  const body = eventJson({ ...event, id: 42n });
  assert.deepEqual(JSON.parse(body), {
    id: 42,
    type: 'pet.created',
    occurredAt: '2026-11-28T10:00:00.000Z',
    data: { id: 9007199254740992, name: AWKWARD, categoryId: 3, status: 'available' },
  });
  assert.ok(body.endsWith(`"data":${event.data}}`), 'data byte for byte as recorded');
});

test('when an order changes, then its event is named after its status, with the order as the API sends it', () => {
  for (const status of ['placed', 'delivered', 'cancelled'] as const) {
    const event = orderChanged({ id: 5n, petId: 7n, status, placedAt: AT }, AT);
    assert.equal(event.type, `order.${status}`);
    assert.equal(event.cause, undefined);
    assert.equal(event.data, `{"id":5,"petId":7,"status":"${status}","placedAt":"2026-11-28T10:00:00.000Z"}`);
  }
});

test('when a type is checked, then only the four event types are', () => {
  assert.deepEqual(
    ['pet.created', 'order.placed', 'order.delivered', 'order.cancelled', 'pet.deleted', '', '*'].map(
      isEventType,
    ),
    [true, true, true, true, false, false, false],
  );
});

/** An event log in memory, answering as EventStore.list does: ascending ids after afterId, of the types asked. */
function storeOf(count: number): EventStore & { asked: EventListQuery[] } {
  const events: StoredEvent[] = Array.from({ length: count }, (_, i) => ({
    id: BigInt(i + 1),
    type: i % 2 === 0 ? 'pet.created' : 'order.placed',
    occurredAt: AT,
    data: '{}',
  }));
  const asked: EventListQuery[] = [];
  return {
    asked,
    list: async (query) => {
      asked.push(query);
      return events
        .filter((e) => e.id > query.afterId && (query.types.length === 0 || query.types.includes(e.type)))
        .slice(0, query.limit);
    },
    findById: async (id) => events.find((e) => e.id === id),
    lastId: async () => BigInt(events.length),
    watch: () => () => undefined,
    deleteOlderThan: async () => 0,
    count: async () => events.length,
    importBatch: async () => 0,
  };
}

test('when exactly `limit` events follow `after`, then the page holds them all and says no more follow (no next link)', async () => {
  const feed = new EventFeed(storeOf(10));
  const page = await feed.list({ after: 7n, limit: 3 });
  assert.deepEqual(
    page.events.map((e) => e.id),
    [8n, 9n, 10n],
  );
  assert.equal(page.nextAfter, undefined);
  assert.equal('nextAfter' in page, false);
});

test('when more than `limit` events follow, then the page holds `limit` of them and the next position is its last id', async () => {
  const store = storeOf(10);
  const feed = new EventFeed(store);
  const page = await feed.list({ after: 6n, limit: 3 });
  assert.deepEqual(
    page.events.map((e) => e.id),
    [7n, 8n, 9n],
  );
  assert.equal(page.nextAfter, 9n);
  assert.deepEqual(
    store.asked,
    [{ afterId: 6n, types: [], limit: 4 }],
    'one row more than the page, to know',
  );
});

test('when fewer than `limit` events follow, or none, then no next position; defaults: from the start, every type, 20', async () => {
  const store = storeOf(10);
  const feed = new EventFeed(store);
  assert.deepEqual(await feed.list({ after: 9n, limit: 5 }), {
    events: [(await feed.find(10n)) as StoredEvent],
  });
  assert.deepEqual(await feed.list({ after: 10n, limit: 5 }), { events: [] });
  const all = await feed.list({});
  assert.equal(all.events.length, 10);
  assert.equal(all.nextAfter, undefined);
  assert.deepEqual(store.asked.at(-1), { afterId: 0n, types: [], limit: 21 });
});

test('when types repeat, then each is asked for once', async () => {
  const store = storeOf(10);
  const page = await new EventFeed(store).list({ types: ['order.placed', 'order.placed'], limit: 2 });
  assert.deepEqual(store.asked, [{ afterId: 0n, types: ['order.placed'], limit: 3 }]);
  assert.deepEqual(
    page.events.map((e) => e.id),
    [2n, 4n],
  );
  assert.equal(page.nextAfter, 4n);
  assert.equal(await new EventFeed(store).find(11n), undefined);
});
