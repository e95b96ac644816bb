import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { newApiKey } from '../../src/domain/api-keys.js';
import type { Storage } from '../../src/domain/storage.js';
import { wrapMethods } from '../../src/storage/intercept-errors.js';
import { openStorage } from '../../src/storage/open-storage.js';
import { after, backends, before, sqlite, test } from '../support/backends.js';
import { TestStream } from '../support/event-stream.js';
import { NEVER_MS, until } from '../support/eventually.js';
import { withStores } from '../support/storage.js';
import { startTestServer, TEST_KEY, type TestServer, testConfig } from '../support/test-server.js';

/**
 * What a live stream must not be able to keep: its key once revoked or expired, a slot once its client
 * left, a shutdown once its client stopped reading, and reads beyond its key's rate limit. Each was
 * reproduced against the service as a user or an attacker would (issue "defects on the new surfaces").
 */

const START = new Date('2026-12-03T12:00:00.000Z');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How `stream` ended; fails, naming `what`, if it never does. */
const ending = (stream: TestStream, what: string) =>
  Promise.race([
    stream.ended,
    sleep(NEVER_MS).then(() => {
      throw new Error(`gave up waiting for ${what}`);
    }),
  ]);
/** Resolves when `promise` does; fails, naming `what`, if it never does. */
const settles = <T>(promise: Promise<T>, what: string) =>
  Promise.race([
    promise,
    sleep(NEVER_MS).then(() => {
      throw new Error(`gave up waiting for ${what}`);
    }),
  ]);

const closedFor = async (server: TestServer, reason: string) => {
  const text = (await server.request('GET', '/metrics')).text;
  return Number(
    new RegExp(`^petstore_event_streams_closed_total\\{reason="${reason}"\\} (\\d+)`, 'm').exec(text)?.[1] ??
      0,
  );
};

/** A stream opened over a raw socket whose client never reads a byte of the answer. */
function stalledStream(server: TestServer, query: string, key = TEST_KEY): Socket {
  const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
  socket.on('error', () => undefined);
  socket.write(
    `GET /v1/events${query} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${key}\r\n\r\n`,
  );
  socket.pause();
  return socket;
}

/** Events of about 4 KB each, enough of them to fill both ends' socket buffers many times over. */
async function importEvents(storage: Storage, count: number, size = 4_000): Promise<bigint> {
  const from = await storage.events.lastId();
  const data = JSON.stringify({ name: 'x'.repeat(size) });
  await storage.events.importBatch(
    Array.from({ length: count }, (_, i) => ({
      id: from + 1n + BigInt(i),
      type: 'pet.created' as const,
      occurredAt: START,
      data,
    })),
  );
  return from;
}

for (const backend of backends) {
  backend.describe(`a live stream whose key is revoked or expires (${backend.name})`, () => {
    const clock = { now: new Date() };
    let server: TestServer;
    let otherNode: Storage;
    before(async () => {
      server = await startTestServer({ backend, now: () => clock.now });
      // Revoked through another connection to the database, as `petstore keys revoke` or another node does.
      otherNode = await openStorage(testConfig(server.database.url));
    });
    after(async () => {
      await otherNode.close();
      await server.close();
    });

    test('when a key with open streams is revoked elsewhere, or passes its expiry, then its streams end (counted as revoked) while other keys keep theirs, and a request with it is 401', async () => {
      clock.now = new Date();
      const revoked = newApiKey('revoked', clock.now);
      const expiring = newApiKey('expiring', clock.now, {
        expiresAt: new Date(clock.now.getTime() + 60_000),
      });
      for (const key of [revoked, expiring]) await server.storage.apiKeys.insert(key.record);
      const before = await closedFor(server, 'revoked');
      const url = `${server.url}/v1/events?after=${await server.storage.events.lastId()}`;
      const [ofRevoked, ofExpiring, ofOther] = await Promise.all([
        TestStream.open(url, { key: revoked.secret }),
        TestStream.open(url, { key: expiring.secret }),
        TestStream.open(url),
      ]);
      assert.deepEqual([ofRevoked.status, ofExpiring.status, ofOther.status], [200, 200, 200]);

      assert.equal(await otherNode.apiKeys.revoke(revoked.record.id, new Date()), true);
      assert.equal(
        await ending(ofRevoked, "the revoked key's stream to end"),
        'end',
        'ended cleanly, as at shutdown',
      );
      clock.now = new Date(clock.now.getTime() + 60_000);
      assert.equal(await ending(ofExpiring, "the expired key's stream to end"), 'end');
      await until(
        () => closedFor(server, 'revoked'),
        (n) => n === before + 2,
        'both counted as revoked',
      );

      for (const key of [revoked, expiring])
        await until(
          async () => (await server.request('GET', '/v1/events?limit=1', { key: key.secret })).status,
          (status) => status === 401,
          'a request with the key to be refused',
        );
      // The configured key's stream is still open: it is sent the next event.
      const pet = await server.request('POST', '/v1/pets', { body: { name: 'Rex', categoryId: 1 } });
      assert.equal(pet.status, 201);
      const [message] = await ofOther.waitFor(1);
      assert.equal(message?.type, 'pet.created');
      ofOther.close();
    });
  });
}

sqlite.describe('a live stream whose client stops reading or leaves early (sqlite)', () => {
  let server: TestServer;
  let lookups = { started: 0, answered: 0 };
  before(async () => {
    server = await startTestServer({
      env: { EVENT_STREAM_KEEP_ALIVE_MS: '200' },
      // Each stored key's lookup takes a while: the window in which a client may go away.
      wrapStorage: (storage) =>
        withStores(storage, {
          apiKeys: wrapMethods(storage.apiKeys, (call, method) =>
            method === 'findActiveByHash'
              ? async (...args) => {
                  lookups.started++;
                  await sleep(150);
                  const key = await call(args);
                  lookups.answered++;
                  return key;
                }
              : (...args) => call(args),
          ),
        }),
    });
  });
  after(() => server.close());

  test('when five clients go away while their key is being looked up, then the key can still open all 10 of its streams', async () => {
    const key = newApiKey('flaky network', new Date());
    await server.storage.apiKeys.insert(key.record);
    lookups = { started: 0, answered: 0 };
    for (let n = 0; n < 5; n++) {
      const socket = stalledStream(server, `?after=${2 ** 40}`, key.secret);
      await until(
        async () => lookups.started,
        (started) => started === n + 1,
        'the lookup to begin',
      );
      socket.destroy();
    }
    await until(
      async () => lookups.answered,
      (answered) => answered === 5,
      'the five lookups to end',
    );
    await sleep(50); // the handlers that follow each lookup, on the next turns
    const streams = await Promise.all(
      Array.from({ length: 10 }, () =>
        TestStream.open(`${server.url}/v1/events?after=${2 ** 40}`, { key: key.secret }),
      ),
    );
    assert.deepEqual(
      streams.map((s) => s.status),
      Array(10).fill(200),
    );
    for (const stream of streams) stream.close();
  });

  test('when a client stops reading while it catches up, a page at a time, then its stream is closed as slow although less than EVENT_STREAM_BUFFER_BYTES waits', async () => {
    const slowBefore = await closedFor(server, 'slow');
    const from = await importEvents(server.storage, 3_000);
    const socket = stalledStream(server, `?after=${from}`);
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    await until(
      () => closedFor(server, 'slow'),
      (slow) => slow === slowBefore + 1,
      'the stalled stream to be closed as slow',
    );
    socket.resume();
    await closed;
  });
});

sqlite.describe('a shutdown with a stream whose client stopped reading while it caught up (sqlite)', () => {
  test('when the node closes, then the stalled stream is cut off after the drain grace and the close completes', async () => {
    const server = await startTestServer();
    const from = await importEvents(server.storage, 3_000);
    const socket = stalledStream(server, `?after=${from}`);
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    await until(
      async () => (await server.request('GET', '/metrics')).text,
      (text) => /^petstore_event_streams 1$/m.test(text),
      'the stream to open',
    );
    await sleep(300); // catch-up fills both socket buffers and waits for the client
    // Before the fix: never returned while the client held on.
    await settles(server.close(), 'the node to close');
    socket.resume(); // only a socket that reads learns it was closed
    await closed;
    assert.ok(socket.bytesRead > 0, 'the stream had begun');
  });
});

sqlite.describe('a live stream catching up, under its key rate limit (sqlite)', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ env: { RATE_LIMIT_PER_SECOND: '0.1', RATE_LIMIT_BURST: '3' } });
  });
  after(() => server.close());

  test('when a stream catches up on 1,000 events, then each page after the first costs one request of its key, and past the burst it waits as a request would be refused', async () => {
    const from = await importEvents(server.storage, 1_000, 10);
    const stream = await TestStream.open(`${server.url}/v1/events?after=${from}`);
    assert.equal(stream.status, 200);
    // The stream's request took one token; its pages the other two, then it waits (0.1 a second).
    await stream.waitFor(300);
    const next = await server.request('GET', '/v1/events?limit=1');
    assert.equal(next.status, 429, next.text);
    assert.equal(stream.messages.length, 300, 'no page beyond what the bucket allowed');
    stream.close();
  });
});
