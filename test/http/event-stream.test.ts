import assert from 'node:assert/strict';
import { connect } from 'node:net';
import fc from 'fast-check';
import { openFileLimit } from '../../src/config/config.js';
import type { Storage } from '../../src/domain/storage.js';
import { wrapMethods } from '../../src/storage/intercept-errors.js';
import { after, backends, before, sqlite, test } from '../support/backends.js';
import { TestStream } from '../support/event-stream.js';
import { until } from '../support/eventually.js';
import { propertyRuns } from '../support/property-runs.js';
import { withStores } from '../support/storage.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

/**
 * The live event stream (`GET /v1/events` with `Accept: text/event-stream`) on each backend: messages as
 * the HTML standard parses them, resuming, the filters, the per-key bound, a consumer that stops
 * reading, and what idle streams cost the database. One server per backend; a stream is a real
 * connection. Racing writers on several nodes and processes: event-stream-race.test.ts.
 */

/** Keys besides TEST_KEY, for many streams at once (each key may hold EVENT_STREAM_MAX_PER_KEY). */
const KEYS = Array.from({ length: 101 }, (_, i) => `stream-key-${String(i).padStart(3, '0')}-0123456789`);

/** Reads of the event log (the stream's catch-ups and its node's reads), counted; `lists` of them pages. */
const reads = { count: 0, lists: 0 };
function countingEventReads(storage: Storage): Storage {
  const events = wrapMethods(storage.events, (call, method) => (...args) => {
    if (method === 'list') reads.lists++;
    if (method === 'list' || method === 'lastId') reads.count++;
    return call(args);
  });
  return withStores(storage, { events });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const backend of backends) {
  backend.describe(`the live event stream (${backend.name})`, () => {
    let server: TestServer;
    const streams: TestStream[] = [];
    before(async () => {
      server = await startTestServer({
        backend,
        env: { PETSTORE_API_KEYS: [TEST_KEY, ...KEYS].join(',') },
        wrapStorage: countingEventReads,
      });
    });
    after(async () => {
      for (const stream of streams) stream.close();
      await server.close();
    });

    const open = async (query = '', headers: Record<string, string> = {}, key = TEST_KEY) => {
      const stream = await TestStream.open(`${server.url}/v1/events${query}`, { headers, key });
      streams.push(stream);
      return stream;
    };
    const createPet = async (name: string) => {
      const res = await server.request('POST', '/v1/pets', { body: { name, categoryId: 1 } });
      assert.equal(res.status, 201, res.text);
      return res.json<{ id: number }>().id;
    };
    const lastId = async () => Number(await server.storage.events.lastId());
    const metric = async (line: RegExp) => {
      const text = (await server.request('GET', '/metrics')).text;
      return Number(line.exec(text)?.[1] ?? 0);
    };

    test('when a stream is opened, then it is 200 text/event-stream, retry: 2000 first, and each event one message: its id, its type, and the Event exactly as getEvent sends it', async () => {
      const from = await lastId();
      const stream = await open(`?after=${from}`);
      assert.equal(stream.status, 200);
      assert.match(String(stream.headers['content-type']), /^text\/event-stream/);
      assert.equal(stream.headers['cache-control'], 'no-store');
      await createPet('Rex');
      const order = await server.request('POST', '/v1/store/orders', {
        body: { petId: await createPet('Tom') },
      });
      assert.equal(order.status, 201);
      const messages = await stream.waitFor(3);
      assert.ok(stream.raw.startsWith('retry: 2000\n\n'), stream.raw.slice(0, 40));
      assert.deepEqual(stream.retries, [2000]);
      assert.deepEqual(
        messages.map((m) => m.type),
        ['pet.created', 'pet.created', 'order.placed'],
      );
      const ids = stream.ids();
      assert.deepEqual(
        ids,
        [...ids].sort((a, b) => a - b),
        'ascending',
      );
      assert.ok((ids[0] ?? 0) > from);
      for (const message of messages) {
        const one = await server.request('GET', `/v1/events/${message.lastEventId}`);
        assert.equal(message.data, one.text, 'byte for byte what getEvent sends');
      }
      stream.close();
    });

    test('when a stream asks for types, after, and a Last-Event-ID, then Last-Event-ID wins over after and only those types come, old ones first', async () => {
      const first = await createPet('Bella');
      const order = await server.request('POST', '/v1/store/orders', { body: { petId: first } });
      await server.request('POST', `/v1/store/orders/${order.json<{ id: number }>().id}/cancel`);
      const placedId = (await lastId()) - 1;
      const stream = await open(`?after=0&type=order.cancelled&type=pet.created`, {
        'last-event-id': String(placedId - 1),
      });
      await createPet('Max');
      const messages = await stream.waitFor(2);
      assert.deepEqual(
        messages.map((m) => [m.type, Number(m.lastEventId)]),
        [
          ['order.cancelled', placedId + 1],
          ['pet.created', placedId + 2],
        ],
      );
      stream.close();
    });

    test('when a stream is opened with after=now, then its first message after retry: is the newest id alone, then only what commits after; the feed refuses now, and a bad after names what it takes', async () => {
      await createPet('before now');
      const newest = await lastId();
      const stream = await open('?after=now');
      assert.equal(stream.status, 200);
      await until(
        async () => stream.raw,
        (raw) => raw.includes(`id: ${newest}\n\n`),
        'the position message',
      );
      assert.ok(stream.raw.startsWith(`retry: 2000\n\nid: ${newest}\n\n`), stream.raw.slice(0, 60));
      const rex = await createPet('after now');
      const [message] = await stream.waitFor(1);
      assert.equal(stream.messages.length, 1, 'the id alone dispatches nothing');
      assert.equal(JSON.parse(message?.data ?? '{}').data.id, rex);
      assert.equal(message?.lastEventId, String(newest + 1));
      stream.close();
      // Last-Event-ID wins over after=now, as over any after.
      const resumed = await open('?after=now', { 'last-event-id': String(newest) });
      const [again] = await resumed.waitFor(1);
      assert.equal(again?.lastEventId, String(newest + 1));
      assert.doesNotMatch(resumed.raw, new RegExp(`^retry: 2000\n\nid: ${newest}\n\n`));
      resumed.close();
      const feed = await server.request('GET', '/v1/events?after=now');
      assert.equal(feed.status, 400);
      assert.equal(
        feed.json<{ message: string }>().message,
        'after=now applies to the live stream (Accept: text/event-stream); the feed takes an event id',
      );
      const bad = await server.request('GET', '/v1/events?after=later');
      assert.equal(bad.status, 400);
      assert.equal(
        bad.json<{ message: string }>().message,
        'after must be an event id, an integer from 0 to 2^63-1 (or now, on the live stream)',
      );
    });

    test('when a stream is asked with limit or a malformed Last-Event-ID, then it is 400 with the Error body; without the Accept value the feed answers as before', async () => {
      const limited = await open('?limit=5');
      assert.equal(limited.status, 400);
      assert.match(
        await limited.body(),
        /"code":"invalid_request","message":"limit does not apply to a stream/,
      );
      const malformed = await open('', { 'last-event-id': '12abc' });
      assert.equal(malformed.status, 400);
      assert.match(await malformed.body(), /Last-Event-ID must be an event id/);
      const feed = await server.request('GET', '/v1/events?limit=1', { headers: { accept: '*/*' } });
      assert.equal(feed.status, 200);
      assert.match(String(feed.headers.get('content-type')), /^application\/json/);
    });

    test('when names hold line separators, and an event recorded elsewhere holds CR and LF in its JSON, then no byte of them ends a message or starts a field', async () => {
      const from = await lastId();
      const stream = await open(`?after=${from}`);
      // The API refuses control characters in a name; U+2028, U+0085's neighbours and escapes it takes.
      await createPet('Rex\u2028id: 1\u2029data: x');
      await createPet('a\\nb\\r\\n: c');
      // migrate-data copies events as they are: JSON may carry CR and LF between its tokens.
      const id = BigInt(from + 1_000_000);
      await server.storage.events.importBatch([
        {
          id,
          type: 'pet.created',
          occurredAt: new Date(),
          data: '{\r\n"id": 1,\r"name": "x\\r\\n",\n"categoryId": 1, "status": "available"\r\n}',
        },
      ]);
      await createPet('after the import'); // wakes the node, which reads the imported event too
      const messages = await stream.waitFor(4);
      assert.equal(messages.length, 4);
      for (const message of messages) {
        const one = await server.request('GET', `/v1/events/${message.lastEventId}`);
        assert.deepEqual(JSON.parse(message.data), JSON.parse(one.text));
      }
      assert.equal(messages[2]?.lastEventId, String(id));
      assert.equal(messages[0]?.type, 'pet.created');
      stream.close();
    });

    test('when a stream is broken at any point of a sequence (before, between, after events) and resumed with the last id received, then every event arrives exactly once, in order', async () => {
      await fc.assert(
        fc.asyncProperty(
          // Per connection: how many messages to read before it breaks, and pets created while it is down.
          fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 2 })), {
            minLength: 1,
            maxLength: 4,
          }),
          async (connections) => {
            const from = await lastId();
            let lastSeen: string | undefined;
            const seen: number[] = [];
            await createPet('before');
            for (const [read, createdMeanwhile] of connections) {
              const stream = await open(
                `?after=${from}`,
                lastSeen === undefined ? {} : { 'last-event-id': lastSeen },
              );
              const ready = await lastId();
              const waiting = ready - Number(lastSeen ?? from);
              const take = Math.min(read, waiting);
              await stream.waitFor(take);
              stream.close();
              await stream.ended;
              seen.push(...stream.ids());
              lastSeen = stream.lastId() ?? lastSeen;
              for (let n = 0; n < createdMeanwhile; n++) await createPet('meanwhile');
            }
            // The last connection reads to the end.
            const stream = await open(
              `?after=${from}`,
              lastSeen === undefined ? {} : { 'last-event-id': lastSeen },
            );
            const end = await lastId();
            await until(
              async () => stream.ids(),
              (ids) => (ids[ids.length - 1] ?? Number(lastSeen ?? from)) >= end,
              'the rest of the events',
            );
            stream.close();
            seen.push(...stream.ids());
            const expected = Array.from({ length: end - from }, (_, i) => from + 1 + i);
            assert.deepEqual(seen, expected);
          },
        ),
        { numRuns: propertyRuns(8) },
      );
    });

    test('when a key opens an 11th stream, then it is 429 with the Error body, and once one closes another opens', async () => {
      const key = KEYS[100] as string;
      const open10 = await Promise.all(Array.from({ length: 10 }, () => open(`?after=${2 ** 40}`, {}, key)));
      assert.deepEqual(
        open10.map((s) => s.status),
        Array(10).fill(200),
      );
      const eleventh = await open('', {}, key);
      assert.equal(eleventh.status, 429);
      assert.match(await eleventh.body(), /"code":"rate_limited".*at most 10 open at once/);
      open10[0]?.close();
      await open10[0]?.ended;
      const again = await until(
        () => open(`?after=${2 ** 40}`, {}, key),
        (s) => {
          if (s.status !== 200) s.close();
          return s.status === 200;
        },
        'a stream to open once one closed',
      );
      assert.equal(again.status, 200);
      for (const s of [...open10, again]) s.close();
    });

    test('when a consumer stops reading, then its stream is closed once EVENT_STREAM_BUFFER_BYTES (1 MiB) wait unsent, and counted as slow', async () => {
      const slowBefore = await metric(/^petstore_event_streams_closed_total\{reason="slow"\} (\d+)/m);
      const from = await lastId();
      // A client that sends its request and never reads a byte of the answer.
      const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
      socket.write(
        `GET /v1/events?after=${from} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${TEST_KEY}\r\n\r\n`,
      );
      socket.pause();
      const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
      socket.on('error', () => undefined);
      await until(
        () => metric(/^petstore_event_streams (\d+)/m),
        (open) => open >= 1,
        'the stream to open',
      );
      // 16 MB of events: far beyond the bound and the kernel's socket buffers on both sides.
      const big = JSON.stringify({ name: 'x'.repeat(16_000) });
      await server.storage.events.importBatch(
        Array.from({ length: 1_000 }, (_, i) => ({
          id: BigInt(from + 2_000_000 + i),
          type: 'pet.created' as const,
          occurredAt: new Date(),
          data: big,
        })),
      );
      await createPet('wake the node');
      await until(
        () => metric(/^petstore_event_streams_closed_total\{reason="slow"\} (\d+)/m),
        (slow) => slow === slowBefore + 1,
        'the slow stream to be closed',
      );
      socket.resume();
      await closed;
    });

    test('when 1,000 streams are open and idle, then the database is not read at all, and each change is read once for all of them', {
      // Both ends of every stream are in this process: 2,000 descriptors and the rest of the suite's.
      skip: openFileLimit() < 4_096 ? `ulimit -n is ${openFileLimit()}: 1,000 streams need 4,096` : false,
    }, async (t) => {
      const from = await lastId();
      const listsBefore = reads.lists;
      const many = await Promise.all(
        Array.from({ length: 1_000 }, (_, i) => open(`?after=${from}`, {}, KEYS[i % 100])),
      );
      assert.ok(many.every((s) => s.status === 200));
      // Every stream's catch-up read begun: one page each (nothing after `from`), besides the node's
      // one read of the head, which is not a page. Counted by pages, so that the head's read cannot
      // stand in for a catch-up that a busy machine has not begun yet. Then no read for 300 ms.
      await until(
        async () => reads.lists - listsBefore,
        (count) => count >= 1_000,
        'every stream to make its catch-up read',
      );
      for (let seen = -1; seen !== reads.count; ) {
        seen = reads.count;
        await sleep(300);
      }
      const idleFrom = reads.count;
      await sleep(2_000);
      const idleReads = reads.count - idleFrom;
      const writesFrom = reads.count;
      for (let n = 0; n < 5; n++) await createPet(`for a thousand ${n}`);
      await until(
        async () => many.map((s) => s.messages.length),
        (counts) => counts.every((count) => count === 5),
        'every stream to get the 5 events',
      );
      const changeReads = reads.count - writesFrom;
      for (const s of many) s.close();
      t.diagnostic(`1000 idle streams: ${idleReads} event reads in 2 s idle, ${changeReads} for 5 changes`);
      assert.equal(idleReads, 0, 'idle streams cost no database reads');
      assert.ok(changeReads <= 5, `${changeReads} reads for 5 changes`);
    });
  });
}

sqlite.describe('the live event stream, keep-alives', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(() => server.close());

  test('when a stream stays idle, then a `: keep-alive` comment comes within 15 s; once closed it counts in the stream metrics, not as a request of that duration', async () => {
    const opened = Date.now();
    const stream = await TestStream.open(`${server.url}/v1/events?after=${2 ** 40}`);
    await until(
      async () => stream.raw,
      (raw) => raw.includes('\n: keep-alive\n\n'),
      'a keep-alive comment',
    );
    assert.ok(Date.now() - opened <= 15_000, `the first keep-alive after ${Date.now() - opened} ms`);
    assert.equal(stream.messages.length, 0, 'a comment is no message');
    stream.close();
    const metrics = async () => (await server.request('GET', '/metrics')).text;
    await until(
      metrics,
      (text) => /^petstore_event_streams_closed_total\{reason="client"\} 1$/m.test(text),
      'the close to be counted',
    );
    assert.doesNotMatch(await metrics(), /^petstore_http_requests_total\{[^}]*route="\/v1\/events"/m);
  });
});
