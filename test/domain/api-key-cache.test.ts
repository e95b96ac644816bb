import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ApiKeyCache, KEY_CACHE_LIMIT, KEY_CACHE_TTL_MS } from '../../src/domain/api-key-cache.js';
import { ApiKeyVerifier, newApiKey } from '../../src/domain/api-keys.js';
import type { ApiKeyStore } from '../../src/domain/storage.js';
import { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.js';

const BAD_KEY = 'pst_not-a-key-0123456789';

/**
 * The key cache is a product rule (how long a revocation or a new key takes to reach a node), so it is
 * tested here with its clock in hand, over a real store that needs no server: SQLite in memory.
 */
describe('the API key cache', () => {
  let storage: SqliteStorage;
  before(() => {
    storage = new SqliteStorage(':memory:', { timeoutMs: 1_000 });
  });
  after(() => storage.close());

  /** The store, as another process would see the database, with its key lookups counted. */
  function countingStore(): { store: ApiKeyStore; lookups: () => number } {
    let lookups = 0;
    const real = storage.apiKeys;
    const store: ApiKeyStore = {
      findActiveByHash: (hash) => {
        lookups++;
        return real.findActiveByHash(hash);
      },
      insert: (key) => real.insert(key),
      recordLastUse: (uses) => real.recordLastUse(uses),
      revoke: (id, at) => real.revoke(id, at),
      importBatch: (keys) => real.importBatch(keys),
      list: () => real.list(),
      count: () => real.count(),
    };
    return { store, lookups: () => lookups };
  }

  function cachedVerifier(start: number, rememberActive = true) {
    const clock = { now: start };
    const { store, lookups } = countingStore();
    const cache = new ApiKeyCache(store, { rememberActive }, () => clock.now);
    const verifier = new ApiKeyVerifier(cache, []);
    /** The caller's key hash when the token authenticates, else undefined. */
    const authenticate = async (token: string) => (await verifier.authenticate(token))?.apiKeyHash;
    return { clock, cache, lookups, verifier: { authenticate } };
  }

  test('when one unknown key is sent again and again, then the database is asked once per period', async () => {
    const { clock, verifier, lookups } = cachedVerifier(1_000_000);
    for (let i = 0; i < 100; i++) assert.equal(await verifier.authenticate(BAD_KEY), undefined);
    assert.equal(lookups(), 1);
    clock.now += KEY_CACHE_TTL_MS + 1;
    assert.equal(await verifier.authenticate(BAD_KEY), undefined);
    assert.equal(lookups(), 2, 'asked again once the refusal expired');
  });

  test('when a valid key is sent again and again, then the database is asked once per period', async () => {
    const { clock, verifier, lookups } = cachedVerifier(1_500_000);
    const key = newApiKey('busy', new Date());
    await storage.apiKeys.insert(key.record);
    for (let i = 0; i < 100; i++) assert.equal(await verifier.authenticate(key.secret), key.record.hash);
    assert.equal(lookups(), 1);
    clock.now += KEY_CACHE_TTL_MS + 1;
    assert.equal(await verifier.authenticate(key.secret), key.record.hash);
    assert.equal(lookups(), 2);
  });

  test('when a key refused a moment ago is created elsewhere, then it works once the period has passed', async () => {
    const { clock, verifier } = cachedVerifier(2_000_000);
    const key = newApiKey('late', new Date());
    assert.equal(await verifier.authenticate(key.secret), undefined);
    await storage.apiKeys.insert(key.record); // not through this cache: another process
    assert.equal(await verifier.authenticate(key.secret), undefined, 'still refused within the period');
    clock.now += KEY_CACHE_TTL_MS + 1;
    assert.equal(await verifier.authenticate(key.secret), key.record.hash);
  });

  test('when a key is revoked elsewhere, then it is refused once the period has passed, and not before', async () => {
    const { clock, verifier } = cachedVerifier(3_000_000);
    const key = newApiKey('revoked elsewhere', new Date());
    await storage.apiKeys.insert(key.record);
    assert.equal(await verifier.authenticate(key.secret), key.record.hash);
    assert.equal(await storage.apiKeys.revoke(key.record.id, new Date()), true);
    clock.now += KEY_CACHE_TTL_MS - 1;
    assert.equal(await verifier.authenticate(key.secret), key.record.hash, 'within the bound');
    clock.now += 2;
    assert.equal(await verifier.authenticate(key.secret), undefined, 'past the bound');
  });

  test('when a key is created or revoked through the cache itself, then this process sees it at once', async () => {
    const { cache, verifier } = cachedVerifier(4_000_000);
    const key = newApiKey('here', new Date());
    assert.equal(await verifier.authenticate(key.secret), undefined);
    await cache.insert(key.record);
    assert.equal(await verifier.authenticate(key.secret), key.record.hash);
    assert.equal(await cache.revoke(key.record.id, new Date()), true);
    assert.equal(await verifier.authenticate(key.secret), undefined);
  });

  test('when more distinct keys arrive than the cache holds, then it starts over instead of growing', async () => {
    const { verifier, lookups } = cachedVerifier(5_000_000);
    for (let i = 0; i <= KEY_CACHE_LIMIT; i++) await verifier.authenticate(`pst_unknown-${i}-0123456789`);
    assert.equal(lookups(), KEY_CACHE_LIMIT + 1);
    // The cache was full at the last one, so it started over: the first key is looked up again.
    await verifier.authenticate('pst_unknown-0-0123456789');
    assert.equal(lookups(), KEY_CACHE_LIMIT + 2);
  });

  test('when found keys are not remembered (SQLite), then a revocation elsewhere is effective at once, and refusals are still remembered', async () => {
    const { clock, verifier, lookups } = cachedVerifier(6_000_000, false);
    const key = newApiKey('at once', new Date());
    await storage.apiKeys.insert(key.record);
    assert.equal(await verifier.authenticate(key.secret), key.record.hash);
    assert.equal(await verifier.authenticate(key.secret), key.record.hash);
    assert.equal(lookups(), 2, 'a found key is looked up every time');
    assert.equal(await storage.apiKeys.revoke(key.record.id, new Date()), true);
    assert.equal(await verifier.authenticate(key.secret), undefined, 'refused at once');
    assert.equal(await verifier.authenticate(key.secret), undefined);
    assert.equal(lookups(), 3, 'the refusal is remembered');
    clock.now += KEY_CACHE_TTL_MS + 1;
    assert.equal(await verifier.authenticate(key.secret), undefined);
    assert.equal(lookups(), 4);
  });

  test('when a lookup was remembered, then it is trusted until exactly KEY_CACHE_TTL_MS later, and asked again from that instant', async () => {
    const { clock, verifier, lookups } = cachedVerifier(7_000_000);
    await verifier.authenticate(BAD_KEY);
    clock.now += KEY_CACHE_TTL_MS - 1;
    await verifier.authenticate(BAD_KEY);
    assert.equal(lookups(), 1, 'still trusted 1 ms before the end');
    clock.now += 1;
    await verifier.authenticate(BAD_KEY);
    assert.equal(lookups(), 2, 'asked again at the end');
  });

  test('when keys are imported, listed, counted or used through the cache, then the store does it, and an import is seen at once', async () => {
    const { cache, verifier } = cachedVerifier(8_000_000);
    const key = newApiKey('imported through the cache', new Date('2026-01-01T00:00:00.000Z'));
    assert.equal(await verifier.authenticate(key.secret), undefined, 'unknown, and the refusal remembered');
    const before = await cache.count();
    assert.equal(await cache.importBatch([key.record]), 1);
    assert.equal(await verifier.authenticate(key.secret), key.record.hash, 'the import forgot the refusal');
    assert.equal(await cache.count(), before + 1);
    const usedAt = new Date('2026-02-03T04:05:06.789Z');
    await cache.recordLastUse([{ hash: key.record.hash, at: usedAt }]);
    const listed = (await cache.list()).find((record) => record.id === key.record.id);
    assert.deepEqual(listed?.lastUsedAt, usedAt);
  });

  test('when two lookups are remembered, then both are trusted: the cache starts over only when full', async () => {
    const { verifier, lookups } = cachedVerifier(9_000_000);
    await verifier.authenticate('pst_first-unknown-0123456789');
    await verifier.authenticate('pst_second-unknown-0123456789');
    await verifier.authenticate('pst_first-unknown-0123456789');
    await verifier.authenticate('pst_second-unknown-0123456789');
    assert.equal(lookups(), 2);
  });
});
