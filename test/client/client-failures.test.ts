import assert from 'node:assert/strict';
import { createServer as createHttpServer, type IncomingHttpHeaders } from 'node:http';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import type { TestContext } from 'node:test';
import {
  fromJson,
  type Pet,
  PetstoreClient,
  PetstoreError,
  PetstoreNetworkError,
  toJson,
} from '../../packages/client/src/index.js';
import { after, backends, before, describe, test } from '../support/backends.js';
import { freePort } from '../support/free-port.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A real HTTP server that answers every request as given, recording each request's headers. */
async function fixedAnswer(
  t: TestContext,
  status: number,
  contentType: string,
  body: string,
): Promise<{ baseUrl: string; requests: IncomingHttpHeaders[] }> {
  const requests: IncomingHttpHeaders[] = [];
  const server = createHttpServer((request, response) => {
    requests.push(request.headers);
    request.resume();
    response.writeHead(status, { 'content-type': contentType }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, requests };
}

/** The client's retry option, as its constructor takes it. */
type Retry = ConstructorParameters<typeof PetstoreClient>[0]['retry'];

/**
 * A real TCP server in front of the service that resets the first `resets` connections it accepts
 * (RST, as a crashed or restarting node does) and forwards every later one; it counts them all.
 */
async function resettingFront(
  t: TestContext,
  service: TestServer,
  resets: number,
): Promise<{ connections: () => number; client: (retry: Retry) => PetstoreClient }> {
  let accepted = 0;
  const open = new Set<Socket>();
  const front = createServer((client) => {
    accepted++;
    if (accepted <= resets) {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(Number(new URL(service.url).port), '127.0.0.1');
    open.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        front.close(() => resolve());
      }),
  );
  const baseUrl = `http://127.0.0.1:${(front.address() as AddressInfo).port}/v1`;
  return {
    connections: () => accepted,
    // A client of the service through this front, with the retries asked for.
    client: (retry) => new PetstoreClient({ baseUrl, apiKey: TEST_KEY, retry }),
  };
}

describe("typed client: answers that are not the service's", () => {
  test('when a proxy answers 502 with an HTML page, then a PetstoreError unexpected_response carries the status, the start of the body and the request id sent', async (t) => {
    const page = `<html><head><title>502 Bad Gateway</title></head><body>${'x'.repeat(2000)}</body></html>`;
    const proxy = await fixedAnswer(t, 502, 'text/html', page);
    const client = new PetstoreClient({ baseUrl: proxy.baseUrl, apiKey: TEST_KEY });
    const error = await client.listPets().then(
      () => assert.fail('no error'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof PetstoreError, String(error));
    assert.equal(error.code, 'unexpected_response');
    assert.equal(error.status, 502);
    assert.equal(error.body, page.slice(0, 512));
    assert.equal(error.message, "502 Bad Gateway: the answer is not the service's Error body");
    assert.equal(proxy.requests.length, 1, 'a 502 is not retried');
    assert.match(error.requestId ?? '', UUID);
    assert.equal(error.requestId, proxy.requests[0]?.['x-request-id']);
  });

  test('when a 2xx answer is not JSON, or an error answer is JSON but not an Error body, then PetstoreError unexpected_response', async (t) => {
    const html = await fixedAnswer(t, 200, 'text/html', '<p>Welcome to the hotel wifi</p>');
    const ok = new PetstoreClient({ baseUrl: html.baseUrl, apiKey: TEST_KEY });
    await assert.rejects(
      ok.getOrder(1n),
      (error: unknown) =>
        error instanceof PetstoreError &&
        error.code === 'unexpected_response' &&
        error.status === 200 &&
        error.body === '<p>Welcome to the hotel wifi</p>' &&
        error.message === '200 OK: the answer is not JSON',
    );
    const json = await fixedAnswer(t, 500, 'application/json', '{"error":"upstream failed"}');
    const other = new PetstoreClient({ baseUrl: json.baseUrl, apiKey: TEST_KEY });
    await assert.rejects(
      other.createPet({ name: 'Rex', categoryId: 1 }),
      (error: unknown) =>
        error instanceof PetstoreError &&
        error.code === 'unexpected_response' &&
        error.status === 500 &&
        error.body === '{"error":"upstream failed"}',
    );
  });
});

for (const backend of backends) {
  backend.describe(`typed client: request ids, retries, JSON (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ backend });
    });
    after(() => server.close());

    test('when the service refuses a request, then the PetstoreError carries the request id the service logged it under', async () => {
      const sent: string[] = [];
      const client = new PetstoreClient({
        baseUrl: `${server.url}/v1`,
        apiKey: TEST_KEY,
        fetch: async (input, init) => {
          const response = await fetch(input, init);
          sent.push(response.headers.get('x-request-id') ?? '');
          return response;
        },
      });
      const error = await client.getOrder(987_654n).then(
        () => assert.fail('no error'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof PetstoreError);
      assert.equal(error.code, 'not_found');
      assert.match(error.requestId ?? '', UUID);
      assert.deepEqual(sent, [error.requestId]);
    });

    test('when nothing listens, then the PetstoreNetworkError carries the request id that was sent', async () => {
      const closed = new PetstoreClient({
        baseUrl: `http://127.0.0.1:${await freePort()}/v1`,
        apiKey: TEST_KEY,
        retry: false,
      });
      const error = await closed.listPets().then(
        () => assert.fail('no error'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof PetstoreNetworkError);
      assert.equal(error.code, 'network_error');
      assert.match(error.requestId ?? '', UUID);
    });

    test('when the first two connections are reset, then a read succeeds on the third; with retries off it fails on the first', async (t) => {
      const front = await resettingFront(t, server, 2);
      const client = front.client({ baseDelayMs: 10 });
      assert.ok(Array.isArray((await client.listPets({ limit: 1 })).pets));
      assert.equal(front.connections(), 3);

      const once = await resettingFront(t, server, 1);
      const noRetry = once.client(false);
      await assert.rejects(
        noRetry.listPets(),
        (error: unknown) => error instanceof PetstoreNetworkError && error.code === 'network_error',
      );
      assert.equal(once.connections(), 1);
    });

    test('when the first two connections are reset, then createPet (with the Idempotency-Key the client made up) succeeds on the third and stores one pet', async (t) => {
      const front = await resettingFront(t, server, 2);
      const client = front.client({ baseDelayMs: 10 });
      const name = `reset-${Date.now()}`;
      const pet = await client.createPet({ name, categoryId: 1 });
      assert.equal(front.connections(), 3);
      const all: Pet[] = [];
      const direct = new PetstoreClient({ baseUrl: `${server.url}/v1`, apiKey: TEST_KEY });
      for await (const each of direct.listAllPets({ limit: 100 })) if (each.name === name) all.push(each);
      assert.deepEqual(all, [pet]);
    });

    test('when more connections are reset than maxRetries allows, then the call fails after 1 + maxRetries tries', async (t) => {
      const front = await resettingFront(t, server, 10);
      const client = front.client({ maxRetries: 3, baseDelayMs: 10 });
      await assert.rejects(
        client.getPet(1n),
        (error: unknown) => error instanceof PetstoreNetworkError && error.code === 'network_error',
      );
      assert.equal(front.connections(), 4);
    });

    test('when a pet with an id beyond 2^53 is serialised, then JSON.stringify throws but toJson writes its exact digits, and fromJson reads it back', async () => {
      await server.storage.pets.importBatch([
        { id: 9007199254740993n, name: 'Big', categoryId: 9007199254740995n, status: 'available' },
      ]);
      const client = new PetstoreClient({ baseUrl: `${server.url}/v1`, apiKey: TEST_KEY });
      const { pets } = await client.listPets({ id: [9007199254740993n] });
      const [big] = pets;
      assert.ok(big);
      assert.throws(() => JSON.stringify(big), /BigInt/);
      const text = toJson(big);
      assert.equal(
        text,
        '{"id":9007199254740993,"name":"Big","categoryId":9007199254740995,"status":"available"}',
      );
      assert.deepEqual(fromJson<Pet>(text), big);
      assert.equal(
        toJson({ pets }, 2),
        '{\n  "pets": [\n    {\n      "id": 9007199254740993,\n      "name": "Big",\n      "categoryId": 9007199254740995,\n      "status": "available"\n    }\n  ]\n}',
      );
    });

    test('when conditionalGets is on, then reading again what did not change is a 304 with no body and gives the same value; after a change, the new one', async () => {
      const seen: { status: number; ifNoneMatch: string | null; bytes: number }[] = [];
      const client = new PetstoreClient({
        baseUrl: `${server.url}/v1`,
        apiKey: TEST_KEY,
        conditionalGets: true,
        fetch: async (input, init) => {
          const request = input instanceof Request ? input : new Request(input, init);
          const response = await fetch(request);
          const bytes = (await response.clone().arrayBuffer()).byteLength;
          seen.push({ status: response.status, ifNoneMatch: request.headers.get('if-none-match'), bytes });
          return response;
        },
      });
      const pet = await client.createPet({ name: 'Cached', categoryId: 1 });
      const order = await client.placeOrder({ petId: pet.id });
      seen.length = 0;
      const first = await client.getOrder(order.id);
      const again = await client.getOrder(order.id);
      assert.deepEqual(again, first);
      const page = await client.listOrders({ id: [order.id] });
      assert.deepEqual((await client.listOrders({ id: [order.id] })).orders, page.orders);
      assert.deepEqual(
        seen.map(({ status, ifNoneMatch, bytes }) => [status, ifNoneMatch !== null, bytes > 0]),
        [
          [200, false, true],
          [304, true, false],
          [200, false, true],
          [304, true, false],
        ],
      );
      await client.deliverOrder(order.id);
      assert.deepEqual(await client.getOrder(order.id), { ...first, status: 'delivered' });
      assert.deepEqual(seen.at(-1)?.status, 200);
      await assert.rejects(
        client.getOrder(987_654n),
        (error: unknown) => error instanceof PetstoreError && error.code === 'not_found',
      );
    });

    test('when listPets is given ids and a small limit, then next repeats the ids and listAllPets yields those pets once each', async () => {
      const client = new PetstoreClient({ baseUrl: `${server.url}/v1`, apiKey: TEST_KEY });
      const made: Pet[] = [];
      for (let i = 0; i < 3; i++) made.push(await client.createPet({ name: `by-id-${i}`, categoryId: i }));
      const ids = made.map((pet) => pet.id);
      const first = await client.listPets({
        id: [ids[2] as bigint, ids[0] as bigint, ids[1] as bigint],
        limit: 2,
      });
      assert.deepEqual(first.pets, made.slice(0, 2));
      assert.deepEqual(first.next?.id, ids);
      const walked: Pet[] = [];
      for await (const pet of client.listAllPets({ id: ids, limit: 2 })) walked.push(pet);
      assert.deepEqual(walked, made);
    });
  });
}
