import { hash, randomBytes, randomUUID } from 'node:crypto';
import { KEY_CACHE_TTL_MS } from './api-key-cache.js';
import { API_KEY_SCOPES, type ApiKeyScope, isApiKeyScope } from './scopes.js';
import type { ApiKeyRecord, ApiKeyStore } from './storage.js';

export { API_KEY_SCOPES, type ApiKeyScope, isApiKeyScope } from './scopes.js';

/** A key's scopes from a comma-separated list (`pets:read,orders:write`): each known, at least one; a repeat counts once. */
export function parseScopes(list: string): ApiKeyScope[] {
  const names = list.split(',').map((name) => name.trim());
  if (names.some((name) => name === ''))
    throw new Error(`--scopes must be a comma-separated list of ${API_KEY_SCOPES.join(', ')}`);
  const unknown = names.filter((name) => !isApiKeyScope(name));
  if (unknown.length > 0)
    throw new Error(`unknown scope ${unknown.join(', ')}; scopes are ${API_KEY_SCOPES.join(', ')}`);
  return API_KEY_SCOPES.filter((scope) => names.includes(scope));
}

const DURATION_UNITS_MS = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;

/** Milliseconds in a lifetime such as `90d`, `12h`, `30m` or `2w`: a positive whole number and one unit. */
export function parseDuration(text: string): number {
  const match = /^([1-9][0-9]{0,5})([mhdw])$/.exec(text);
  if (!match)
    throw new Error(`--expires-in must be a whole number and a unit (m, h, d or w), e.g. 90d; got "${text}"`);
  return Number(match[1]) * DURATION_UNITS_MS[match[2] as keyof typeof DURATION_UNITS_MS];
}

/** An RFC 3339 date-time with its offset (`2027-03-31T00:00:00Z`, `2027-03-31T02:00:00+02:00`). */
const RFC_3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ]([01]\d|2[0-3]):([0-5]\d):([0-5]\d)(\.\d+)?([Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)$/;

/** The instant an RFC 3339 date-time names, or undefined; Date alone would take 30 February as 2 March. */
function parseRfc3339(text: string): Date | undefined {
  const match = RFC_3339.exec(text);
  if (!match) return undefined;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const calendar = new Date(Date.UTC(year, month - 1, day));
  if (calendar.getUTCMonth() !== month - 1 || calendar.getUTCDate() !== day) return undefined;
  return new Date(text);
}

/**
 * When a new key stops working: `--expires-in` from `now`, or `--expires-at` as given, never both;
 * undefined for a key that does not expire. An instant that is not after `now` is refused: such a key
 * would be dead on arrival.
 */
export function expiryOf(
  { expiresIn, expiresAt }: { expiresIn?: string | undefined; expiresAt?: string | undefined },
  now: Date,
): Date | undefined {
  if (expiresIn !== undefined && expiresAt !== undefined)
    throw new Error('give --expires-in or --expires-at, not both');
  let expiry: Date | undefined;
  if (expiresIn !== undefined) expiry = new Date(now.getTime() + parseDuration(expiresIn));
  if (expiresAt !== undefined) {
    expiry = parseRfc3339(expiresAt);
    if (expiry === undefined)
      throw new Error(
        `--expires-at must be an RFC 3339 date-time, e.g. 2027-03-31T00:00:00Z; got "${expiresAt}"`,
      );
  }
  if (expiry !== undefined && expiry.getTime() <= now.getTime())
    throw new Error(`the expiry ${expiry.toISOString()} is not in the future`);
  return expiry;
}

/** Whether a key can be used at `now`: not revoked, and not past its expiry. */
export function keyStatus(key: ApiKeyRecord, now: Date): 'active' | 'expired' | 'revoked' {
  if (key.revokedAt !== undefined) return 'revoked';
  if (key.expiresAt !== undefined && key.expiresAt.getTime() <= now.getTime()) return 'expired';
  return 'active';
}

/** Recognisable in logs, config files and secret scanners. */
export const API_KEY_PREFIX = 'pst_';
const SECRET_BYTES = 32; // 256 bits of entropy
const MAX_TOKEN_LENGTH = 512;

/** SHA-256 of the key, hex: the only form a key is ever stored in. */
export function hashApiKey(secret: string): string {
  // The one-shot crypto.hash: 1.3 µs against createHash's 4.3 µs, on every authenticated request.
  return hash('sha256', secret, 'hex');
}

export interface IssuedApiKey {
  /** The key itself: shown once, never stored. */
  secret: string;
  record: ApiKeyRecord;
}

export interface ApiKeyGrant {
  /** All four unless fewer are named. */
  scopes?: readonly ApiKeyScope[];
  expiresAt?: Date | undefined;
}

export function newApiKey(
  name: string,
  now: Date,
  { scopes = API_KEY_SCOPES, expiresAt }: ApiKeyGrant = {},
): IssuedApiKey {
  const secret = API_KEY_PREFIX + randomBytes(SECRET_BYTES).toString('base64url');
  return {
    secret,
    record: {
      id: `key_${randomUUID().replaceAll('-', '').slice(0, 16)}`,
      name,
      hash: hashApiKey(secret),
      hint: secret.slice(-4),
      scopes: [...scopes],
      createdAt: now,
      expiresAt,
      revokedAt: undefined,
      lastUsedAt: undefined,
    },
  };
}

/** Who a request comes from, once its key is known: never the key itself. */
export interface Caller {
  /**
   * SHA-256 of the key: the caller's identity from then on (rate-limit buckets, idempotency keys,
   * last use). The key itself goes no further.
   */
  apiKeyHash: string;
  /**
   * The key's id, safe to log: a stored key's (`key_…`, as `keys list` shows it), or `env:<n>` for the
   * n-th key of PETSTORE_API_KEYS (from 1), which has no stored id.
   */
  apiKeyId: string;
  scopes: readonly ApiKeyScope[];
}

/**
 * Decides whether a bearer token is a live key. Tokens are compared by their SHA-256 digest, looked up
 * as a whole: a caller cannot learn a key byte by byte from response times, because changing one byte
 * of the token changes the whole digest. Lookups go to the store, which remembers them (ApiKeyCache);
 * expiry is compared here, with this verifier's clock, on every request, so a key stops working at its
 * expiry instant even where its lookup is remembered.
 */
export class ApiKeyVerifier {
  readonly #store: ApiKeyStore;
  readonly #configured: ReadonlyMap<string, Caller>;
  readonly #now: () => Date;
  readonly #used: ((apiKeyHash: string, at: Date) => void) | undefined;
  /** isLiveKey's memory: the hashes of every live key, and until when they are trusted. */
  #liveHashes: { hashes: ReadonlySet<string>; until: number } | undefined;
  #liveHashesLoad: Promise<ReadonlySet<string>> | undefined;

  /**
   * `used` is told of every request a stored key authenticates (not the configured ones: they are not
   * stored), synchronously: it must not do I/O (ApiKeyLastUse).
   */
  constructor(
    store: ApiKeyStore,
    configuredKeys: readonly string[],
    now: () => Date = () => new Date(),
    used?: (apiKeyHash: string, at: Date) => void,
  ) {
    this.#store = store;
    // docs/api.md: keys from PETSTORE_API_KEYS have every scope.
    this.#configured = new Map(
      configuredKeys
        .map(hashApiKey)
        .map((apiKeyHash, index) => [
          apiKeyHash,
          { apiKeyHash, apiKeyId: `env:${index + 1}`, scopes: API_KEY_SCOPES },
        ]),
    );
    this.#now = now;
    this.#used = used;
  }

  /**
   * Whether `token` is a live key, answered for a client address refused for too many failed
   * authentications: a valid key is still served from there (a flood of bad keys from behind a shared
   * address must not lock its other users out), yet a bad token costs no lookup of its own. The answer
   * comes from the set of live key hashes, read whole at most once per KEY_CACHE_TTL_MS, and only
   * while such addresses send tokens, so a key created on another node is known here within that bound.
   */
  isLiveKey(token: string): boolean | Promise<boolean> {
    if (token.length === 0 || token.length > MAX_TOKEN_LENGTH) return false;
    const hash = hashApiKey(token);
    if (this.#configured.has(hash)) return true;
    const now = this.#now().getTime();
    if (this.#liveHashes && this.#liveHashes.until > now) return this.#liveHashes.hashes.has(hash);
    this.#liveHashesLoad ??= this.#store
      .list()
      .then((keys) => {
        const at = this.#now();
        const hashes = new Set(keys.filter((key) => keyStatus(key, at) === 'active').map((key) => key.hash));
        this.#liveHashes = { hashes, until: at.getTime() + KEY_CACHE_TTL_MS };
        return hashes;
      })
      .finally(() => {
        this.#liveHashesLoad = undefined;
      });
    return this.#liveHashesLoad.then((hashes) => hashes.has(hash));
  }

  /**
   * Which of `apiKeyHashes` (callers authenticated earlier) are still live keys now: a key revoked on
   * any node, or past its expiry by this verifier's clock, is not. Asked of the store itself, not of
   * any lookup remembered, so what holds a key's connection open (a live stream) learns of a
   * revocation as soon as the database has it. Configured keys are always live and cost no read.
   */
  async stillLive(apiKeyHashes: Iterable<string>): Promise<Set<string>> {
    const live = new Set<string>();
    const stored: string[] = [];
    for (const hash of apiKeyHashes) {
      if (this.#configured.has(hash)) live.add(hash);
      else stored.push(hash);
    }
    if (stored.length === 0) return live;
    const at = this.#now();
    const active = new Set(
      (await this.#store.list()).filter((key) => keyStatus(key, at) === 'active').map((key) => key.hash),
    );
    for (const hash of stored) if (active.has(hash)) live.add(hash);
    return live;
  }

  /**
   * The caller when the token is a live key, else undefined. A configured key (PETSTORE_API_KEYS) is
   * answered at once, without a promise: it needs no database, and it is on the path of every request
   * of a deployment that uses it.
   */
  authenticate(token: string): Caller | undefined | Promise<Caller | undefined> {
    if (token.length === 0 || token.length > MAX_TOKEN_LENGTH) return undefined;
    const hash = hashApiKey(token);
    const configured = this.#configured.get(hash);
    if (configured) return configured;
    return this.#store.findActiveByHash(hash).then((key) => {
      if (key === undefined) return undefined;
      const now = this.#now();
      // An expired key is refused exactly as an unknown one (docs/api.md).
      if (keyStatus(key, now) !== 'active') return undefined;
      this.#used?.(hash, now);
      return { apiKeyHash: hash, apiKeyId: key.id, scopes: key.scopes };
    });
  }
}

/**
 * docs/api.md: when no key exists at all, the first start creates one so a new user is one copy-paste
 * from a working request. Returns the new key's secret, or undefined when keys already exist.
 */
export async function ensureFirstApiKey(
  store: ApiKeyStore,
  configuredKeys: readonly string[],
  now: Date,
): Promise<string | undefined> {
  if (configuredKeys.length > 0 || (await store.count()) > 0) return undefined;
  const key = newApiKey('first key (created at first start)', now);
  await store.insert(key.record);
  return key.secret;
}
