import assert from 'node:assert/strict';
import type { TestServer } from './test-server.js';

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

/** One link-value of an RFC 8288 `Link` header: its target and its parameters (names lower-cased). */
export interface LinkValue {
  target: string;
  params: Record<string, string>;
}

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const QUOTED = '"(?:[^"\\\\]|\\\\.)*"';
const LINK_VALUE = new RegExp(
  `^<([^<>]*)>((?:[ \\t]*;[ \\t]*${TOKEN}(?:[ \\t]*=[ \\t]*(?:${TOKEN}|${QUOTED}))?)*)`,
);
const LINK_PARAM = new RegExp(`;[ \\t]*(${TOKEN})(?:[ \\t]*=[ \\t]*(${TOKEN}|${QUOTED}))?`, 'g');

/**
 * Parses a `Link` header as RFC 8288 §3 writes it: link-values separated by commas, each a target in
 * angle brackets and `;`-separated parameters, token or quoted-string. Anything else fails the test.
 */
export function parseLinkHeader(header: string): LinkValue[] {
  const links: LinkValue[] = [];
  let rest = header.trim();
  while (rest !== '') {
    const match = LINK_VALUE.exec(rest);
    assert.ok(match, `not an RFC 8288 Link header: ${header}`);
    const params: Record<string, string> = {};
    for (const [, name, value] of (match[2] as string).matchAll(LINK_PARAM)) {
      const key = (name as string).toLowerCase();
      // §3: a parameter that occurs more than once counts only the first time.
      if (key in params) continue;
      params[key] =
        value === undefined ? '' : value.startsWith('"') ? value.slice(1, -1).replace(/\\(.)/g, '$1') : value;
    }
    links.push({ target: match[1] as string, params });
    rest = rest.slice(match[0].length).trim();
    if (rest === '') break;
    assert.ok(rest.startsWith(','), `not an RFC 8288 Link header: ${header}`);
    rest = rest.slice(1).trim();
  }
  return links;
}

/**
 * The target of a response's `rel="next"` link, or undefined when it has none. A `rel` holds
 * space-separated relation types, compared case-insensitively; more than one next link fails the test.
 */
export function nextHref(response: { headers: Headers }): string | undefined {
  const header = response.headers.get('link');
  if (header === null) return undefined;
  const next = parseLinkHeader(header).filter((link) =>
    (link.params.rel ?? '')
      .toLowerCase()
      .split(/[ \t]+/)
      .includes('next'),
  );
  assert.ok(next.length <= 1, `more than one next link: ${header}`);
  return next[0]?.target;
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
 * Follows `next` links from `firstPath` to the last page: `fetchPage` asks for one path (a 200 is
 * required), and the pages come back in order. `beforeNext` runs before each following page is fetched.
 */
export async function walkLinks<R extends { status: number; text: string; headers: Headers }>(
  firstPath: string,
  fetchPage: (path: string) => Promise<R>,
  beforeNext: () => Promise<void> = async () => {},
): Promise<R[]> {
  const pages: R[] = [];
  let path: string | undefined = firstPath;
  while (path !== undefined) {
    const res = await fetchPage(path);
    assert.equal(res.status, 200, `${path}: ${res.text}`);
    pages.push(res);
    const href = nextHref(res);
    path = href === undefined ? undefined : toPath(href);
    if (path !== undefined) await beforeNext();
    assert.ok(pages.length < 10_000, 'the walk does not end');
  }
  return pages;
}

/** Every page's pets, following `next` links from `firstPath` on the test server. */
export async function walkPages(
  server: TestServer,
  firstPath: string,
  beforeNext: () => Promise<void> = async () => {},
): Promise<PetBody[][]> {
  const pages = await walkLinks(firstPath, (path) => server.request('GET', path), beforeNext);
  return pages.map((page) => page.json<PetBody[]>());
}
