import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestContext } from 'node:test';
import {
  type Order,
  type Pet,
  PetstoreClient,
  type PetstoreClientOptions,
  PetstoreError,
  PetstoreNetworkError,
} from '../../packages/client/src/index.js';
import { newApiKey } from '../../src/domain/api-keys.js';
import { after, backends, before, describe, sqlite, test } from '../support/backends.js';
import { freePort } from '../support/free-port.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

for (const backend of backends) {
  backend.describe(`typed client (${backend.name})`, () => {
    let server: TestServer;
    let client: PetstoreClient;
    before(async () => {
      server = await startTestServer({ backend });
      client = new PetstoreClient({ baseUrl: `${server.url}/v1`, apiKey: TEST_KEY });
    });
    after(() => server.close());

    test('when a pet is created, then the client returns it with int64 fields exact as bigint', async () => {
      const pet = await client.createPet({ name: 'Rex', categoryId: 2n ** 63n - 1n, status: 'sold' });
      assert.equal(typeof pet.id, 'bigint');
      assert.deepEqual(pet, { id: pet.id, name: 'Rex', categoryId: 2n ** 63n - 1n, status: 'sold' });
      assert.deepEqual(await client.getPet(pet.id), pet);
    });

    test('when a number is sent for categoryId, then it is accepted and read back as bigint', async () => {
      const pet = await client.createPet({ name: 'Tom', categoryId: 7 });
      assert.equal(pet.categoryId, 7n);
      assert.equal(pet.status, 'available');
    });

    test('when pets span several pages, then listAllPets follows Link next and yields each once, in order', async () => {
      const created: Pet[] = [];
      for (let i = 0; i < 11; i++)
        created.push(await client.createPet({ name: `page-${i}`, categoryId: i, status: 'pending' }));
      const first = await client.listPets({ status: 'pending', limit: 4 });
      assert.deepEqual(first.pets, created.slice(0, 4));
      assert.equal(first.next?.limit, 4);
      assert.equal(first.next?.status, 'pending');
      assert.equal(typeof first.next?.cursor, 'string');

      const walked: Pet[] = [];
      for await (const pet of client.listAllPets({ status: 'pending', limit: 4 })) walked.push(pet);
      assert.deepEqual(walked, created);
    });

    test('when an order is placed, delivered and another cancelled, then the client returns each Order with its ids exact as bigint', async () => {
      const rex = await client.createPet({ name: 'Rex', categoryId: 1 });
      const order = await client.placeOrder({ petId: rex.id });
      assert.equal(typeof order.id, 'bigint');
      assert.deepEqual(order, { id: order.id, petId: rex.id, status: 'placed', placedAt: order.placedAt });
      assert.match(order.placedAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      assert.deepEqual(await client.getOrder(order.id), order);
      assert.equal((await client.getPet(rex.id)).status, 'pending');
      assert.deepEqual(await client.deliverOrder(order.id), { ...order, status: 'delivered' });
      assert.deepEqual(await client.deliverOrder(order.id), { ...order, status: 'delivered' });
      assert.equal((await client.getPet(rex.id)).status, 'sold');

      const tom = await client.createPet({ name: 'Tom', categoryId: 2 });
      const other = await client.placeOrder({ petId: Number(tom.id) });
      assert.deepEqual(await client.cancelOrder(other.id), { ...other, status: 'cancelled' });
      assert.equal((await client.getPet(tom.id)).status, 'available');
      await assert.rejects(
        client.deliverOrder(other.id),
        (error: unknown) =>
          error instanceof PetstoreError && error.code === 'conflict' && error.status === 409,
      );
      await assert.rejects(
        client.placeOrder({ petId: rex.id }),
        (error: unknown) =>
          error instanceof PetstoreError &&
          error.status === 409 &&
          error.message === 'the animal is sold; only an available animal can be ordered',
      );
      await assert.rejects(
        client.placeOrder({ petId: 2n ** 63n - 1n }),
        (error: unknown) => error instanceof PetstoreError && error.code === 'invalid_request',
      );
    });

    test('when placeOrder is sent twice with one idempotencyKey, then the second returns the first order', async () => {
      const pet = await client.createPet({ name: 'Keyed', categoryId: 3 });
      const idempotencyKey = randomUUID();
      const first = await client.placeOrder({ petId: pet.id }, { idempotencyKey });
      assert.deepEqual(await client.placeOrder({ petId: pet.id }, { idempotencyKey }), first);
    });

    test('when orders span several pages, then listAllOrders follows Link next with the filters and yields each once, in order', async () => {
      const pet = await client.createPet({ name: 'Often ordered', categoryId: 4 });
      const cancelled: Order[] = [];
      for (let i = 0; i < 7; i++) {
        cancelled.push(await client.cancelOrder((await client.placeOrder({ petId: pet.id })).id));
      }
      const first = await client.listOrders({ petId: pet.id, status: 'cancelled', limit: 3 });
      assert.deepEqual(first.orders, cancelled.slice(0, 3));
      assert.deepEqual([first.next?.limit, first.next?.status, first.next?.petId], [3, 'cancelled', pet.id]);
      const walked: Order[] = [];
      for await (const order of client.listAllOrders({ petId: pet.id, status: 'cancelled', limit: 3 }))
        walked.push(order);
      assert.deepEqual(walked, cancelled);
    });

    test('when the service refuses a request, then a PetstoreError carries its code, status and message', async () => {
      await assert.rejects(
        client.createPet({ name: '', categoryId: 1 }),
        (error: unknown) =>
          error instanceof PetstoreError &&
          error.code === 'invalid_request' &&
          error.status === 400 &&
          error.message === 'name must be at least 1 character long',
      );
      await assert.rejects(
        client.getPet(9_999_999n),
        (error: unknown) =>
          error instanceof PetstoreError && error.code === 'not_found' && error.status === 404,
      );
      const anonymous = new PetstoreClient({ baseUrl: `${server.url}/v1`, apiKey: 'not-a-key' });
      await assert.rejects(
        anonymous.listPets(),
        (error: unknown) =>
          error instanceof PetstoreError && error.code === 'unauthorized' && error.status === 401,
      );
    });

    test('when a key without the scope an operation needs is used, then a PetstoreError forbidden 403 names the scope, and nothing is retried', async () => {
      const key = newApiKey('client reader', new Date(), { scopes: ['pets:read'] });
      await server.storage.apiKeys.insert(key.record);
      const statuses: number[] = [];
      const reader = new PetstoreClient({
        baseUrl: `${server.url}/v1`,
        apiKey: key.secret,
        fetch: recordingFetch(statuses),
      });
      assert.ok(Array.isArray((await reader.listPets()).pets));
      await assert.rejects(
        reader.createPet({ name: 'Rex', categoryId: 1 }, { idempotencyKey: randomUUID() }),
        (error: unknown) =>
          error instanceof PetstoreError &&
          error.code === 'forbidden' &&
          error.status === 403 &&
          error.message === 'this API key does not have the scope pets:write, which this operation needs',
      );
      await assert.rejects(
        reader.listOrders(),
        (error: unknown) =>
          error instanceof PetstoreError && error.code === 'forbidden' && /orders:read/.test(error.message),
      );
      assert.deepEqual(statuses, [200, 403, 403]);
    });
  });
}

/** A fetch that records the status of every try the client makes, for a test to read. */
function recordingFetch(statuses: number[]): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    statuses.push(response.status);
    return response;
  };
}

/** A bare HTTP server standing in for one that never answers; it reads every request. */
async function silentService(t: TestContext): Promise<string> {
  const server: Server = createServer((request) => request.resume());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

/**
 * The real service's answers, each checked against its OpenAPI document and recorded, with one change:
 * Retry-After says 0, so the client retries at once instead of after the service's 1 to 100 s (what it
 * does with a longer Retry-After is tested above, against the real header).
 */
function realAnswersAtOnce(service: TestServer, statuses: number[]): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const response = await fetch(request);
    const text = await response.text();
    const url = new URL(request.url);
    service.contract.check(
      request.method,
      `${url.pathname}${url.search}`,
      response.status,
      response.headers.get('content-type'),
      text,
    );
    statuses.push(response.status);
    const headers = new Headers(response.headers);
    if (headers.has('retry-after')) headers.set('retry-after', '0');
    return new Response(text, { status: response.status, headers });
  };
}

const isRefusal = (status: number) => (error: unknown) =>
  error instanceof PetstoreError && error.status === status;

describe('typed client: idempotency, retries, timeouts, network failures', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ backend: sqlite });
  });
  after(() => server.close());

  const clientFor = (options: Partial<PetstoreClientOptions> = {}) =>
    new PetstoreClient({ baseUrl: `${server.url}/v1`, apiKey: TEST_KEY, ...options });

  test('when createPet is sent twice with one idempotencyKey, then the second returns the first pet; with another pet, a 422', async () => {
    const client = clientFor();
    const idempotencyKey = randomUUID();
    const first = await client.createPet({ name: 'Once', categoryId: 5 }, { idempotencyKey });
    assert.deepEqual(await client.createPet({ name: 'Once', categoryId: 5 }, { idempotencyKey }), first);
    await assert.rejects(
      client.createPet({ name: 'Other', categoryId: 5 }, { idempotencyKey }),
      (error: unknown) =>
        error instanceof PetstoreError && error.code === 'idempotency_key_reused' && error.status === 422,
    );
  });

  test('when the service answers 429 with Retry-After, then the client waits that long and tries again', async (t) => {
    // One request at once, one more a second later: the second call is refused with Retry-After: 1.
    const limited = await startTestServer({
      backend: sqlite,
      env: { RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '1' },
    });
    t.after(() => limited.close());
    const statuses: number[] = [];
    const client = new PetstoreClient({
      baseUrl: `${limited.url}/v1`,
      apiKey: TEST_KEY,
      fetch: recordingFetch(statuses),
    });
    await client.listPets();
    assert.deepEqual((await client.listPets()).pets, []);
    // Refused once (or, should the retry come a hair early, again), then answered.
    assert.equal(statuses[0], 200);
    assert.equal(statuses.at(-1), 200);
    assert.ok(statuses.length >= 3 && statuses.slice(1, -1).every((status) => status === 429), `${statuses}`);
  });

  test('when Retry-After asks for longer than the wait allowed, or retries are off, then the 429 comes back at once', async (t) => {
    // Refills one request per 100 s: Retry-After says 100, beyond the default 10 s of waiting.
    const limited = await startTestServer({
      backend: sqlite,
      env: { RATE_LIMIT_PER_SECOND: '0.01', RATE_LIMIT_BURST: '1' },
    });
    t.after(() => limited.close());
    assert.equal((await limited.request('GET', '/v1/pets')).status, 200); // the one request of the burst
    for (const retry of [undefined, false] as const) {
      const statuses: number[] = [];
      const client = new PetstoreClient({
        baseUrl: `${limited.url}/v1`,
        apiKey: TEST_KEY,
        fetch: recordingFetch(statuses),
        ...(retry === undefined ? {} : { retry }),
      });
      await assert.rejects(client.listPets(), isRefusal(429));
      assert.deepEqual(statuses, [429], `retry: ${retry}`);
    }
  });

  test('when every try is refused, then the client stops after maxRetries and gives the last answer', async (t) => {
    const limited = await startTestServer({
      backend: sqlite,
      env: { RATE_LIMIT_PER_SECOND: '0.01', RATE_LIMIT_BURST: '1' },
    });
    t.after(() => limited.close());
    assert.equal((await limited.request('GET', '/v1/pets')).status, 200); // the one request of the burst
    const statuses: number[] = [];
    const client = new PetstoreClient({
      baseUrl: `${limited.url}/v1`,
      apiKey: TEST_KEY,
      fetch: realAnswersAtOnce(limited, statuses),
      retry: { maxRetries: 3 },
    });
    await assert.rejects(client.listPets(), isRefusal(429));
    assert.deepEqual(statuses, [429, 429, 429, 429]);
  });

  test('when a 503 comes back, then reads and creates are retried, a create given no key with one the client made up; with retries off, a create is sent once and without a key', async (t) => {
    // The database goes away under the running service: every operation is a real 503.
    const away = await startTestServer({ backend: sqlite });
    await away.storage.close();
    t.after(async () => {
      await away.app.close();
      await away.database.drop();
    });
    /** The Idempotency-Key of every try of the last call (null: none). */
    let keysSent: (string | null)[] = [];
    const tries = async (
      call: (client: PetstoreClient) => Promise<unknown>,
      options: Partial<PetstoreClientOptions> = {},
    ) => {
      const statuses: number[] = [];
      keysSent = [];
      const answer = realAnswersAtOnce(away, statuses);
      const client = new PetstoreClient({
        baseUrl: `${away.url}/v1`,
        apiKey: TEST_KEY,
        fetch: (input, init) => {
          keysSent.push(
            (input instanceof Request ? input.headers : new Headers(init?.headers)).get('idempotency-key'),
          );
          return answer(input, init);
        },
        ...options,
      });
      await assert.rejects(call(client), isRefusal(503));
      assert.ok(
        statuses.every((status) => status === 503),
        `${statuses}`,
      );
      return statuses.length;
    };
    assert.equal(await tries((client) => client.listPets()), 3);
    assert.equal(await tries((client) => client.getPet(1n)), 3);
    assert.equal(
      await tries((client) => client.createPet({ name: 'Rex', categoryId: 1 }, { idempotencyKey: 'k-1' })),
      3,
    );
    assert.deepEqual(keysSent, ['k-1', 'k-1', 'k-1']);
    // Without a key of its own the client makes one up, the same on every try: a retry cannot store twice.
    assert.equal(await tries((client) => client.createPet({ name: 'Rex', categoryId: 1 })), 3);
    assert.match(keysSent[0] ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.deepEqual(keysSent, [keysSent[0], keysSent[0], keysSent[0]]);
    // With retries off, nothing is made up and nothing is sent again.
    assert.equal(
      await tries((client) => client.createPet({ name: 'Rex', categoryId: 1 }), { retry: false }),
      1,
    );
    assert.deepEqual(keysSent, [null]);
    // The Store: reads, keyed orders, and deliveries and cancellations (asked again, they change nothing).
    assert.equal(await tries((client) => client.listOrders()), 3);
    assert.equal(await tries((client) => client.getOrder(1n)), 3);
    assert.equal(await tries((client) => client.placeOrder({ petId: 1 }, { idempotencyKey: 'k-2' })), 3);
    assert.equal(await tries((client) => client.deliverOrder(1n)), 3);
    assert.equal(await tries((client) => client.cancelOrder(1n)), 3);
    assert.equal(await tries((client) => client.placeOrder({ petId: 1 })), 3);
    assert.equal(await tries((client) => client.placeOrder({ petId: 1 }), { retry: false }), 1);
    assert.deepEqual(keysSent, [null]);
  });

  test('when the service does not answer in time, then the call fails with a PetstoreNetworkError timeout', async (t) => {
    const baseUrl = await silentService(t);
    const client = new PetstoreClient({ baseUrl, apiKey: TEST_KEY, timeoutMs: 200 });
    await assert.rejects(
      client.listPets(),
      (error: unknown) =>
        error instanceof PetstoreNetworkError &&
        error.code === 'timeout' &&
        error.message === 'no answer within 200 ms',
    );
  });

  test('when nothing listens at the address, then the call fails with a PetstoreNetworkError network_error', async () => {
    const port = await freePort();
    const client = new PetstoreClient({ baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: TEST_KEY });
    await assert.rejects(
      client.createPet({ name: 'Rex', categoryId: 1 }),
      (error: unknown) =>
        error instanceof PetstoreNetworkError &&
        error.code === 'network_error' &&
        /ECONNREFUSED/.test(error.message) &&
        error.cause instanceof TypeError,
    );
  });
});
