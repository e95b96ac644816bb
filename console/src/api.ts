// The public API, called with the key the user signed in with, as `Authorization: Bearer`. The key lives
// in this module's memory, and in sessionStorage only when the user asks to keep it for the tab.

import { API_KEY_SCOPES, type ApiKeyScope } from '../../src/domain/scopes.js';

/** The service's own list of scopes (a module with no imports, bundled as it is). */
export const SCOPES = API_KEY_SCOPES;
export type Scope = ApiKeyScope;

const rawJSON = (JSON as unknown as { rawJSON?: (text: string) => object }).rawJSON;

/**
 * JSON.parse, keeping an int64 beyond 2^53 exact: as its digits (JSON.rawJSON, which JSON.stringify
 * writes back as they were and the views show as text), where the browser reads a number's source text.
 */
export function parseExact(text: string): unknown {
  return JSON.parse(text, (_key, value: unknown, context?: { source?: string }) =>
    typeof value === 'number' &&
    !Number.isSafeInteger(value) &&
    rawJSON &&
    context?.source &&
    /^-?\d+$/.test(context.source)
      ? rawJSON(context.source)
      : value,
  );
}

/** The API's Error body: {code, message, status}. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** For a 403: the scope the operation needs (from WWW-Authenticate). */
    readonly scope?: Scope,
  ) {
    super(message);
  }
}

export interface Answer<T> {
  status: number;
  data: T;
  /** The `Link: <…>; rel="next"` target, when more may exist. */
  next: string | undefined;
}

const KEPT = 'animal-store-console-key';
let key: string | null = null;
/** Scopes known to be missing (a 403 named them). */
const missing = new Set<Scope>();
const listeners: (() => void)[] = [];

export const signedIn = (): boolean => key !== null;
export const has = (scope: Scope): boolean => key !== null && !missing.has(scope);
export const onScopesChanged = (listener: () => void): void => {
  listeners.push(listener);
};

export function useKey(value: string, keep: boolean): void {
  key = value;
  missing.clear();
  if (keep) sessionStorage.setItem(KEPT, value);
  else sessionStorage.removeItem(KEPT);
}

export function keptKey(): string | null {
  return sessionStorage.getItem(KEPT);
}

export function signOut(): void {
  key = null;
  missing.clear();
  sessionStorage.removeItem(KEPT);
}

export function lacks(scope: Scope): void {
  if (missing.has(scope)) return;
  missing.add(scope);
  for (const listener of listeners) listener();
}

export function authorization(): string {
  return `Bearer ${key ?? ''}`;
}

function nextLink(header: string | null): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(/,(?=\s*<)/)) {
    const match = /<([^>]*)>\s*;(.*)$/.exec(part.trim());
    if (match && /rel="?next"?/.test(match[2] ?? '')) return match[1];
  }
  return undefined;
}

async function failure(res: Response): Promise<ApiFailure> {
  let code = 'error';
  let message = `${res.status} ${res.statusText}`;
  try {
    const body = (await res.json()) as { code?: string; message?: string };
    code = body.code ?? code;
    message = body.message ?? message;
  } catch {
    // not an Error body: the status line says what there is to say
  }
  const scope = /scope="([^"]+)"/.exec(res.headers.get('www-authenticate') ?? '')?.[1] as Scope | undefined;
  return new ApiFailure(res.status, code, message, scope);
}

/**
 * One request to the API. `body` is sent as it is when a string (JSON already written: int64 digits
 * kept), else as JSON. A 403 marks its scope as missing, so what needs it is no longer offered.
 */
export async function call<T>(
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<Answer<T>> {
  const headers: Record<string, string> = { authorization: authorization(), accept: 'application/json' };
  let payload: string | undefined;
  if (body !== undefined) {
    payload = typeof body === 'string' ? body : JSON.stringify(body);
    headers['content-type'] = contentType;
  }
  const res = await fetch(path, { method, headers, body: payload ?? null, cache: 'no-store' });
  if (!res.ok) {
    const error = await failure(res);
    if (res.status === 403 && error.scope) lacks(error.scope);
    throw error;
  }
  const text = res.status === 204 ? '' : await res.text();
  return {
    status: res.status,
    data: (text ? parseExact(text) : undefined) as T,
    next: nextLink(res.headers.get('link')),
  };
}

/** Which of the groups' scopes the key has. No operation tells a key its scopes, so each is tried:
 * a read with limit=1, and a write with an empty body, which the scope check answers 403 before the
 * body is looked at (docs/api.md, Scopes) and which, with the scope, is a 400 that changes nothing. */
export async function probeScopes(): Promise<void> {
  const probes: [Scope, string, string][] = [
    ['pets:read', 'GET', '/v1/pets?limit=1'],
    ['orders:read', 'GET', '/v1/store/orders?limit=1'],
    ['events:read', 'GET', '/v1/events?limit=1'],
    ['webhooks:read', 'GET', '/v1/webhook-endpoints?limit=1'],
    ['pets:write', 'POST', '/v1/pets'],
    ['orders:write', 'POST', '/v1/store/orders'],
    ['webhooks:write', 'POST', '/v1/webhook-endpoints'],
  ];
  const attempt = ([scope, method, path]: [Scope, string, string]) =>
    call(method, path, method === 'POST' ? '{}' : undefined).then(
      () => [scope, true] as const,
      (error: unknown) => {
        if (error instanceof ApiFailure && (error.status === 400 || error.status === 403))
          return [scope, error.status === 400] as const;
        throw error;
      },
    );
  // One first, alone: a key that is not valid is refused once (401), not seven times.
  const [first, ...others] = probes;
  const results = [
    await attempt(first as [Scope, string, string]),
    ...(await Promise.all(others.map(attempt))),
  ];
  for (const [scope, allowed] of results) if (!allowed) missing.add(scope);
}

/** An Error's message split by the field it names ("name must …; categoryId must …"). */
export function byField(
  message: string,
  fields: readonly string[],
): { fields: Map<string, string>; rest: string[] } {
  const found = new Map<string, string>();
  const rest: string[] = [];
  for (const part of message.split('; ')) {
    const name = fields.find(
      (f) => part.startsWith(`${f} `) || part.startsWith(`${f}:`) || part.startsWith(`${f}[`),
    );
    if (name) found.set(name, found.has(name) ? `${found.get(name)}; ${part}` : part);
    else rest.push(part);
  }
  return { fields: found, rest };
}

export function explain(error: unknown): string {
  if (error instanceof ApiFailure) {
    if (error.status === 403)
      return `${error.message} (403 forbidden: this key lacks ${error.scope ?? 'the scope'}; what needs it is no longer offered)`;
    return `${error.message} (${error.status} ${error.code})`;
  }
  return error instanceof Error ? error.message : String(error);
}
