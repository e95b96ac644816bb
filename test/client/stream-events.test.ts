import assert from 'node:assert/strict';
import { Server } from 'node:http';
import { type Event, PetstoreClient, PetstoreError } from '../../packages/client/src/index.js';
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
