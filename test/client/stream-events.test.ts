import assert from 'node:assert/strict';
import { createServer, Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type Event,
  PetstoreClient,
  PetstoreError,
  type StreamedEvent,
  type StreamStatus,
} from '../../packages/client/src/index.js';
import { after, before, sqlite, test } from '../support/backends.js';
import { until } from '../support/eventually.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

/** The client's streamEvents against the real service: resuming after a break, filters, ending on abort. */
sqlite.describe("the client's streamEvents", () => {
  let server: TestServer;
  let client: PetstoreClient;
  before(async () => {
    server = await startTestServer();
    client = new PetstoreClient({ baseUrl: `${server.url}/v1`, apiKey: TEST_KEY });
  });
  after(() => server.close());

  test('when the connection breaks mid-stream, then it reconnects after the retry the service asked for, with Last-Event-ID, and yields each event once, in order; an abort ends the iteration', async () => {
    const first = await client.createPet({ name: 'Rex', categoryId: 1 });
    await client.placeOrder({ petId: first.id });
    const stop = new AbortController();
    const got: Event[] = [];
    const reading = (async () => {
      for await (const event of client.streamEvents({
        types: ['pet.created'],
        after: 0,
        signal: stop.signal,
      }))
        got.push(event);
    })();
    await until(
      async () => got.length,
      (n) => n === 1,
      'the first event',
    );
    // Every connection cut, the stream's too, as a node that dies would leave it.
    Server.prototype.closeAllConnections.call(server.app.server);
    await client.createPet({ name: 'Tom', categoryId: 2 });
    await client.createPet({ name: 'Bella', categoryId: 3 });
    await until(
      async () => got.length,
      (n) => n === 3,
      'the events after the break',
    );
    stop.abort();
    await reading;
    assert.deepEqual(
      got.map((e) => [e.type, (e.data as { name: string }).name]),
      [
        ['pet.created', 'Rex'],
        ['pet.created', 'Tom'],
        ['pet.created', 'Bella'],
      ],
    );
    assert.ok(
      got.every((e, i) => i === 0 || e.id > (got[i - 1] as Event).id),
      'ascending ids, as bigint',
    );
    assert.equal(typeof got[0]?.id, 'bigint');
  });

  test('when the key may not read events, then streamEvents throws the PetstoreError at once', async () => {
    const stranger = new PetstoreClient({
      baseUrl: `${server.url}/v1`,
      apiKey: 'not-a-key-0123456789abcdef',
    });
    await assert.rejects(
      async () => {
        for await (const _ of stranger.streamEvents()) break;
      },
      (error: unknown) => error instanceof PetstoreError && error.status === 401,
    );
  });
});

/** A service of this test's own: each request answered by the next of `answers`, the last one kept open. */
async function scriptedService(answers: ((res: ServerResponse) => void)[]) {
  const asked: { url: string; lastEventId: string | undefined }[] = [];
  const service = createServer((req, res) => {
    asked.push({ url: req.url ?? '', lastEventId: req.headers['last-event-id'] as string | undefined });
    const answer = answers[asked.length - 1];
    if (answer) answer(res);
    else res.writeHead(200, { 'content-type': 'text/event-stream' }); // open, quiet
  });
  await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
  return {
    asked,
    baseUrl: `http://127.0.0.1:${(service.address() as AddressInfo).port}/v1`,
    close: () => {
      service.closeAllConnections();
      service.close();
    },
  };
}

test('when streamEvents starts from now and the service first answers 503 with a Retry-After, then it waits that long, starts where the first message says, yields each event with the JSON it was sent, and tells onStatus every step', async (t) => {
  const json =
    '{"id":8,"type":"pet.created","occurredAt":"2026-12-06T00:00:00.000Z","data":{"id":9007199254740993,"name":"Rex","categoryId":1,"status":"available"}}';
  const service = await scriptedService([
    (res) => res.writeHead(503, { 'retry-after': '1', 'content-type': 'application/json' }).end('{}'),
    (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
      res.end(`retry: 500\n\nid: 7\n\nid: 8\nevent: pet.created\ndata: ${json}\n\n`);
    },
  ]);
  t.after(() => service.close());
  const client = new PetstoreClient({ baseUrl: service.baseUrl, apiKey: TEST_KEY });
  const stop = new AbortController();
  const statuses: StreamStatus[] = [];
  const got: StreamedEvent[] = [];
  const reading = (async () => {
    for await (const streamed of client.streamEventMessages({
      types: ['pet.created'],
      after: 'now',
      signal: stop.signal,
      onStatus: (status) => statuses.push(status),
    }))
      got.push(streamed);
  })();
  await until(
    async () => service.asked.length,
    (n) => n === 3,
    'the stream opened again',
  );
  stop.abort();
  await reading;
  assert.deepEqual(
    got.map(({ event, json }) => [event.id, event.data.id, json]),
    [[8n, 9007199254740993n, json]],
  );
  assert.deepEqual(statuses, [
    { state: 'waiting', reason: 'refused', waitMs: 1000, after: undefined, status: 503 },
    { state: 'ready', after: 7n },
    { state: 'waiting', reason: 'ended', waitMs: 500, after: 8n },
  ]);
  assert.deepEqual(service.asked, [
    { url: '/v1/events?type=pet.created&after=now', lastEventId: undefined },
    { url: '/v1/events?type=pet.created&after=now', lastEventId: undefined },
    { url: '/v1/events?type=pet.created&after=8', lastEventId: '8' },
  ]);
});

test('when the answer is a 200 that is not an event stream, then streamEvents throws a PetstoreError unexpected_response at once', async (t) => {
  const service = await scriptedService([
    (res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>a proxy</html>'),
  ]);
  t.after(() => service.close());
  const client = new PetstoreClient({ baseUrl: service.baseUrl, apiKey: TEST_KEY });
  await assert.rejects(
    async () => {
      for await (const _ of client.streamEvents()) break;
    },
    (error: unknown) =>
      error instanceof PetstoreError && error.code === 'unexpected_response' && error.status === 200,
  );
  assert.equal(service.asked.length, 1);
});
