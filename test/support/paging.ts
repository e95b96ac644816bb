import assert from 'node:assert/strict';
import type { TestResponse, TestServer } from './test-server.js';

/** A pet as the service returns it (ids in these tests stay far below 2^53). */
export interface PetBody {
  id: number;
  name: string;
  categoryId: number;
  status: 'available' | 'pending' | 'sold';
}

const STATUSES = ['available', 'pending', 'sold'] as const;

/** The status of the i-th pet made by createPets: available, pending, sold, available, … */
export const cycleStatus = (i: number): PetBody['status'] =>
  STATUSES[i % STATUSES.length] as PetBody['status'];

/** Creates pets one after the other (so their ids ascend in creation order) and returns them. */
export async function createPets(
  server: TestServer,
  count: number,
  status: (i: number) => PetBody['status'] = cycleStatus,
  prefix = 'pet',
): Promise<PetBody[]> {
  const pets: PetBody[] = [];
  for (let i = 0; i < count; i++) {
    const res = await server.request('POST', '/v1/pets', {
      body: { name: `${prefix}-${i}`, categoryId: i + 1, status: status(i) },
    });
    assert.equal(res.status, 201, res.text);
    pets.push(res.json<PetBody>());
  }
  return pets;
}

/** The raw target of a response's `Link: <…>; rel="next"`, or undefined when it has none. */
export function nextHref(response: TestResponse): string | undefined {
  const header = response.headers.get('link');
  if (header === null) return undefined;
  const match = /^<([^<>]+)>; rel="next"$/.exec(header);
  assert.ok(match, `Link header is not one rel="next" link: ${header}`);
  return match[1];
}

/** A link target as a path on the test server: an absolute link loses its origin. */
export function toPath(href: string): string {
  const url = new URL(href, 'http://relative.invalid');
  return `${url.pathname}${url.search}`;
}

/** The cursor inside a `next` link. */
export function cursorOf(href: string): string {
  const cursor = new URL(href, 'http://relative.invalid').searchParams.get('cursor');
  assert.ok(cursor, `next link without a cursor: ${href}`);
  return cursor;
}

/**
 * Follows `next` links from `firstPath` to the last page, returning every page's pets. `beforeNext`
 * runs before each following page is fetched (not before the first).
 */
export async function walkPages(
  server: TestServer,
  firstPath: string,
  beforeNext: () => Promise<void> = async () => {},
): Promise<PetBody[][]> {
  const pages: PetBody[][] = [];
  let path: string | undefined = firstPath;
  while (path !== undefined) {
    const res = await server.request('GET', path);
    assert.equal(res.status, 200, res.text);
    pages.push(res.json<PetBody[]>());
    const href = nextHref(res);
    path = href === undefined ? undefined : toPath(href);
    if (path !== undefined) await beforeNext();
    assert.ok(pages.length < 10_000, 'the walk does not end');
  }
  return pages;
}
