import type { ApiKeyRecord, ApiKeyStore, ApiKeyUse } from './storage.js';

/**
 * How long a key lookup's answer is trusted without asking the database again. Every request looks its
 * key up: a lookup per request doubled the round trips of a `get` on PostgreSQL, and a flood of requests
 * with one bad key cost a query each (a valid client's throughput fell from 731 to 68 requests/s).
 * docs/api.md allows a revocation to take "seconds" to reach every node: a revoked key is refused, and
 * a newly created one accepted, everywhere within this bound. Expiry needs no bound of its own: the
 * remembered record carries its expiry, which ApiKeyVerifier compares with its clock on every request.
 */
export const KEY_CACHE_TTL_MS = 2_000;
/** Beyond this many remembered lookups the cache starts over: memory stays bounded whatever callers send. */
export const KEY_CACHE_LIMIT = 10_000;

export interface ApiKeyCacheOptions {
  /**
   * Whether a key found active is remembered too, not only a refusal. Worth it where a lookup is a
   * network round trip (PostgreSQL); where it is a few microseconds in the process (SQLite), not
   * remembering keeps a revocation effective at once.
   */
  rememberActive: boolean;
}

/**
 * A key store that remembers what findActiveByHash answered (no key, and with rememberActive a key)
 * for KEY_CACHE_TTL_MS. Changes made through it are seen at once in this process: an insert forgets
 * what was remembered about its hash, a revocation or an import forgets everything. Both adapters are
 * wrapped in it, so the rule and its bound are the same on every database.
 */
export class ApiKeyCache implements ApiKeyStore {
  readonly #store: ApiKeyStore;
  readonly #rememberActive: boolean;
  readonly #now: () => number;
  readonly #lookups = new Map<string, { key: ApiKeyRecord | undefined; until: number }>();

  constructor(store: ApiKeyStore, { rememberActive }: ApiKeyCacheOptions, now: () => number = Date.now) {
    this.#store = store;
    this.#rememberActive = rememberActive;
    this.#now = now;
  }

  async findActiveByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const now = this.#now();
    const remembered = this.#lookups.get(hash);
    if (remembered && remembered.until > now) return remembered.key;
    const key = await this.#store.findActiveByHash(hash);
    if (key !== undefined && !this.#rememberActive) return key;
    if (this.#lookups.size >= KEY_CACHE_LIMIT) this.#lookups.clear();
    this.#lookups.set(hash, { key, until: now + KEY_CACHE_TTL_MS });
    return key;
  }

  insert(key: ApiKeyRecord): Promise<void> {
    this.#lookups.delete(key.hash);
    return this.#store.insert(key);
  }

  revoke(id: string, at: Date): Promise<boolean> {
    // The cache is keyed by hash, not id: forgetting everything is simpler than a second index, and rare.
    this.#lookups.clear();
    return this.#store.revoke(id, at);
  }

  importBatch(keys: readonly ApiKeyRecord[]): Promise<number> {
    this.#lookups.clear();
    return this.#store.importBatch(keys);
  }

  recordLastUse(uses: readonly ApiKeyUse[]): Promise<void> {
    return this.#store.recordLastUse(uses);
  }

  list(): Promise<ApiKeyRecord[]> {
    return this.#store.list();
  }

  count(): Promise<number> {
    return this.#store.count();
  }
}
