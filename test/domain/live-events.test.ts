import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EventListQuery, EventStore, StoredEvent } from '../../src/domain/events.js';
import { type EventSink, LiveEvents } from '../../src/domain/live-events.js';
import { until } from '../support/eventually.js';

const AT = new Date('2026-11-29T00:00:00.000Z');
const turn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * An event log in memory that answers on a later turn what it held when asked (a snapshot, as a
 * database does), and tells its watchers of each commit. `slowNext`: milliseconds the next list takes.
 */
function memoryLog() {
  const events: StoredEvent[] = [];
  const watchers = new Set<() => void>();
  const counts = { lists: 0, watching: 0, slowNext: 0 };
  const store: EventStore = {
    list: async ({ afterId, types, limit }: EventListQuery) => {
      counts.lists++;
      const delay = counts.slowNext;
      counts.slowNext = 0;
      const snapshot = events
        .filter((e) => e.id > afterId && (types.length === 0 || types.includes(e.type)))
        .slice(0, limit);
      await (delay > 0 ? new Promise((resolve) => setTimeout(resolve, delay)) : turn());
      return snapshot;
    },
    findById: async (id) => events.find((e) => e.id === id),
    lastId: async () => {
      await turn();
      return events[events.length - 1]?.id ?? 0n;
    },
    watch: (listener) => {
      watchers.add(listener);
      counts.watching = watchers.size;
      return () => {
        watchers.delete(listener);
        counts.watching = watchers.size;
      };
    },
    deleteOlderThan: async () => 0,
    count: async () => events.length,
    importBatch: async () => 0,
  };
  const commit = (n: number) => {
    for (let i = 0; i < n; i++)
      events.push({
        id: BigInt(events.length + 1),
        type: events.length % 3 === 0 ? 'order.placed' : 'pet.created',
        occurredAt: AT,
        data: '{}',
      });
    setImmediate(() => {
      for (const watcher of watchers) watcher();
    });
  };
  return { store, commit, counts, events };
}

/** A follower that takes what it is sent, and is slow to take more while `slow` holds. */
function follower() {
  const got: StoredEvent[] = [];
  const state = { slow: true, failed: undefined as unknown, startsAfter: undefined as bigint | undefined };
  const sink: EventSink = {
    send: (events) => got.push(...events),
    startsAfter: (id) => {
      state.startsAfter = id;
    },
    drained: async () => {
      while (state.slow) await new Promise((resolve) => setTimeout(resolve, 2));
    },
    failed: (error) => {
      state.failed = error;
    },
  };
  return { got, state, sink };
}

test('when a follower catches up slowly while thousands of events commit (more than it may hold), then it gets every event once, in order, then follows', async () => {
  const log = memoryLog();
  log.commit(450);
  const live = new LiveEvents(log.store);
  const slow = follower();
  const following = live.follow({ after: 0n, types: [] }, slow.sink);
  // While it waits for its client, the node reads 3,000 more: past what a follower may hold.
  for (let burst = 0; burst < 30; burst++) {
    log.commit(100);
    await turn();
    await turn();
  }
  slow.state.slow = false;
  await until(
    async () => slow.got.length,
    (n) => n === log.events.length,
    'every event',
  );
  log.commit(5);
  await until(
    async () => slow.got.length,
    (n) => n === log.events.length,
    'the events that followed',
  );
  assert.deepEqual(
    slow.got.map((e) => e.id),
    log.events.map((e) => e.id),
  );
  following.close();
});

test('when more events than a follower may hold commit during its last catch-up read, then it reads again rather than skip those it dropped', async () => {
  const log = memoryLog();
  log.commit(50);
  const live = new LiveEvents(log.store);
  const reader = follower();
  reader.state.slow = false;
  log.counts.slowNext = 300; // its catch-up read: a page of 50, the end of the log when it was asked
  const following = live.follow({ after: 0n, types: [] }, reader.sink);
  await until(
    async () => log.counts.lists,
    (n) => n >= 1,
    'the catch-up read to begin',
  );
  // Meanwhile the node reads 1,500 new events: the follower holds at most 1,000 of them, and drops them.
  for (let burst = 0; burst < 15; burst++) {
    log.commit(100);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await until(
    async () => reader.got[reader.got.length - 1]?.id,
    (last) => last === log.events[log.events.length - 1]?.id,
    'the last event',
  );
  assert.deepEqual(
    reader.got.map((e) => e.id),
    log.events.map((e) => e.id),
  );
  following.close();
});

test('when followers of different types and positions follow, then each gets its types after its position; when the last leaves, the node stops watching, and a new one starts again', async () => {
  const log = memoryLog();
  log.commit(10);
  const live = new LiveEvents(log.store);
  const pets = follower();
  pets.state.slow = false;
  const all = follower();
  all.state.slow = false;
  const a = live.follow({ after: 4n, types: ['pet.created'] }, pets.sink);
  const b = live.follow({ after: 8n, types: [] }, all.sink);
  await until(
    async () => all.got.length,
    (n) => n === 2,
    'the catch-up',
  );
  log.commit(6);
  await until(
    async () => all.got.length,
    (n) => n === 8,
    'the new events',
  );
  const expectedPets = log.events.filter((e) => e.id > 4n && e.type === 'pet.created').map((e) => e.id);
  await until(
    async () => pets.got.length,
    (n) => n === expectedPets.length,
    'the pets',
  );
  assert.deepEqual(
    pets.got.map((e) => e.id),
    expectedPets,
  );
  assert.deepEqual(
    all.got.map((e) => Number(e.id)),
    [9, 10, 11, 12, 13, 14, 15, 16],
  );
  assert.equal(log.counts.watching, 1, 'one watch for every follower');
  a.close();
  b.close();
  assert.equal(log.counts.watching, 0, 'nobody follows: nothing is watched');
  const later = follower();
  later.state.slow = false;
  const c = live.follow({ after: 16n, types: [] }, later.sink);
  log.commit(1);
  await until(
    async () => later.got.length,
    (n) => n === 1,
    'an event after starting again',
  );
  assert.equal(later.got[0]?.id, 17n);
  c.close();
});

test('when a follower catches up from a copy that lags behind the node (a replica), then full pages come from the copy, a short page is read again from the store, and nothing is skipped', async () => {
  const log = memoryLog();
  log.commit(250);
  // The copy has replayed the first 230 events only.
  const copy = { lists: 0 };
  const lagging = {
    list: async (query: EventListQuery) => {
      copy.lists++;
      return (await log.store.list(query)).filter((event) => event.id <= 230n);
    },
  };
  const live = new LiveEvents(log.store, { catchUpStore: lagging });
  const { got, state, sink } = follower();
  state.slow = false;
  const following = live.follow({ after: 0n, types: [] }, sink);
  await until(
    async () => got.length,
    (n) => n >= 250,
    'every event',
  );
  log.commit(5);
  await until(
    async () => got.length,
    (n) => n >= 255,
    'the events that commit afterwards',
  );
  following.close();
  assert.deepEqual(
    got.map((event) => Number(event.id)),
    Array.from({ length: 255 }, (_, i) => i + 1),
  );
  assert.equal(copy.lists, 3, 'pages 1-100 and 101-200 full, then 201-230 short, from the copy');
});

test('when a follower asks to start now, then it is told the newest id first and sent only what commits after', async () => {
  const log = memoryLog();
  log.commit(42);
  const live = new LiveEvents(log.store);
  const { got, state, sink } = follower();
  state.slow = false;
  const following = live.follow({ after: 'now', types: [] }, sink);
  await until(
    async () => state.startsAfter,
    (id) => id !== undefined,
    'the position',
  );
  assert.equal(state.startsAfter, 42n);
  log.commit(2);
  await until(
    async () => got.length,
    (n) => n >= 2,
    'the two new events',
  );
  following.close();
  assert.deepEqual(
    got.map((event) => Number(event.id)),
    [43, 44],
  );
});
