import { parse } from 'lossless-json';
import { TEST_KEY, type TestResponse, type TestServer } from './test-server.js';

export interface RawRequestOptions {
  /** Sent exactly as given; nothing is serialised and no Content-Type is added. */
  body?: string | Buffer | ReadableStream<Uint8Array>;
  /** Every header to send besides Authorization (lower-case names). */
  headers?: Record<string, string>;
  /** The bearer key; null sends no Authorization header. Defaults to TEST_KEY. */
  key?: string | null;
}

/** Parses JSON keeping every integer exact: a number when that is exact, else a bigint. */
export function parseExact<T = unknown>(text: string): T {
  return parse(text, null, (n) => (Number.isSafeInteger(Number(n)) ? Number(n) : BigInt(n))) as T;
}

/** The value `parseExact` gives for an integer literal: a number when exact, else a bigint. */
export function exactInt(literal: string): number | bigint {
  return Number.isSafeInteger(Number(literal)) ? Number(literal) : BigInt(literal);
}

/**
 * A request with full control over what goes on the wire (no Content-Type unless given, streamed
 * bodies); the response is still checked against the served OpenAPI document.
 */
export async function rawRequest(
  server: TestServer,
  method: string,
  path: string,
  options: RawRequestOptions = {},
): Promise<TestResponse> {
  const headers: Record<string, string> = { ...options.headers };
  const key = options.key === undefined ? TEST_KEY : options.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  const init: RequestInit & { duplex?: 'half' } = { method, headers };
  if (options.body !== undefined) {
    init.body = options.body;
    if (options.body instanceof ReadableStream) init.duplex = 'half';
  }
  const res = await fetch(`${server.url}${path}`, init);
  const text = await res.text();
  server.contract.check(method, path, res.status, res.headers.get('content-type'), text);
  return {
    status: res.status,
    headers: res.headers,
    text,
    json: <T>() => JSON.parse(text) as T,
    exact: <T>() => parseExact<T>(text),
  };
}
