import assert from 'node:assert/strict';
import { walkLinks } from './paging.js';
import type { TestServer } from './test-server.js';

/** An order as the service returns it (ids in these tests stay far below 2^53). */
export interface OrderBody {
  id: number;
  petId: number;
  status: 'placed' | 'delivered' | 'cancelled';
  placedAt: string;
}

/** Adds an animal through the API and returns its id. */
export async function addAnimal(
  server: TestServer,
  status: 'available' | 'pending' | 'sold' = 'available',
  name = 'for the store',
): Promise<number> {
  const res = await server.request('POST', '/v1/pets', { body: { name, categoryId: 1, status } });
  assert.equal(res.status, 201, res.text);
  return res.json<{ id: number }>().id;
}

/** Places an order through the API, asserting its 201, and returns it. */
export async function placeOrder(server: TestServer, petId: number): Promise<OrderBody> {
  const res = await server.request('POST', '/v1/store/orders', { body: { petId } });
  assert.equal(res.status, 201, res.text);
  return res.json<OrderBody>();
}

/** The status of an animal, as listPets reports it (getPet is deprecated). */
export async function animalStatus(server: TestServer, petId: number): Promise<string | undefined> {
  const res = await server.request('GET', `/v1/pets/${petId}`);
  return res.status === 404 ? undefined : res.json<{ status: string }>().status;
}

/** Every order the service lists, walking every page. */
export async function allOrders(server: TestServer, query = ''): Promise<OrderBody[]> {
  const pages = await walkLinks(`/v1/store/orders?limit=100${query}`, (path) => server.request('GET', path));
  return pages.flatMap((page) => page.json<OrderBody[]>());
}
