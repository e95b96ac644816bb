import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { KEY_CACHE_TTL_MS } from '../../src/domain/api-key-cache.js';
import {
  API_KEY_SCOPES,
  ApiKeyVerifier,
  ensureFirstApiKey,
  expiryOf,
  hashApiKey,
  keyStatus,
  newApiKey,
  parseDuration,
  parseScopes,
} from '../../src/domain/api-keys.js';
import type { ApiKeyStore } from '../../src/domain/storage.js';
import { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.js';

const NOW = new Date('2026-11-26T12:00:00.000Z');

describe('API key scopes and lifetimes', () => {
  test('when scopes are listed, then known ones are kept in the canonical order, once each', () => {
    assert.deepEqual(parseScopes('orders:write,pets:read'), ['pets:read', 'orders:write']);
    assert.deepEqual(parseScopes(' pets:read , pets:read '), ['pets:read']);
    assert.deepEqual(parseScopes(API_KEY_SCOPES.join(',')), [...API_KEY_SCOPES]);
  });

  for (const [list, message] of [
    [
      'pets:delete',
      /^unknown scope pets:delete; scopes are pets:read, pets:write, orders:read, orders:write, events:read, webhooks:read, webhooks:write$/,
    ],
    ['pets:read,admin', /^unknown scope admin;/],
    ['', /^--scopes must be a comma-separated list of /],
    ['pets:read,', /^--scopes must be a comma-separated list of /],
    ['PETS:READ', /^unknown scope PETS:READ;/],
  ] as const) {
    test(`when --scopes is "${list}", then it is refused with a message naming the problem`, () => {
      assert.throws(() => parseScopes(list), { message });
    });
  }

  test('when a duration has a unit, then it is that many minutes, hours, days or weeks', () => {
    assert.equal(parseDuration('30m'), 30 * 60_000);
    assert.equal(parseDuration('12h'), 12 * 3_600_000);
    assert.equal(parseDuration('90d'), 90 * 86_400_000);
    assert.equal(parseDuration('2w'), 14 * 86_400_000);
  });

  for (const text of ['90', 'd', '0d', '-1d', '1.5d', '90 d', '90D', '1y', '9999999d', '']) {
    test(`when a duration is "${text}", then it is refused`, () => {
      assert.throws(() => parseDuration(text), {
        message: /^--expires-in must be a whole number and a unit/,
      });
    });
  }

  test('when a key is made, then its id is key_ and 16 hex digits, its hint the last 4 characters of its secret, and its secret starts with pst_', () => {
    const { secret, record } = newApiKey('shape', NOW);
    assert.match(record.id, /^key_[0-9a-f]{16}$/);
    assert.equal(record.hint, secret.slice(-4));
    assert.equal(record.hint.length, 4);
    assert.match(secret, /^pst_[A-Za-z0-9_-]{20,}$/);
  });

  test('when several scopes are unknown, then the message names each, and an empty one lists every scope', () => {
    const ALL_SCOPES =
      'pets:read, pets:write, orders:read, orders:write, events:read, webhooks:read, webhooks:write';
    assert.throws(() => parseScopes('admin,root'), {
      message: `unknown scope admin, root; scopes are ${ALL_SCOPES}`,
    });
    assert.throws(() => parseScopes(''), {
      message: `--scopes must be a comma-separated list of ${ALL_SCOPES}`,
    });
  });

  test('when --expires-at names month 13 or a fraction of several digits, then the first is refused and the second read', () => {
    assert.throws(() => expiryOf({ expiresAt: '2027-13-01T00:00:00Z' }, NOW), {
      message:
        '--expires-at must be an RFC 3339 date-time, e.g. 2027-03-31T00:00:00Z; got "2027-13-01T00:00:00Z"',
    });
    assert.equal(
      expiryOf({ expiresAt: '2027-03-31T00:00:00.123Z' }, NOW)?.toISOString(),
      '2027-03-31T00:00:00.123Z',
    );
  });

  test('when a duration has text before or after it, or too many digits, then it is refused with the whole message', () => {
    for (const text of ['x90d', '90dx', ' 90d', '90d ', '1234567d', '01d']) {
      assert.throws(() => parseDuration(text), {
        message: `--expires-in must be a whole number and a unit (m, h, d or w), e.g. 90d; got "${text}"`,
      });
    }
    assert.equal(parseDuration('999999m'), 999_999 * 60_000, 'six digits are allowed');
  });

  test('when --expires-at is any RFC 3339 form (t, z, a space, fractions, an offset), then it is read; with text around it or a field out of range, it is refused', () => {
    for (const [text, iso] of [
      ['2027-03-31t00:00:00z', '2027-03-31T00:00:00.000Z'],
      ['2027-03-31 23:59:59Z', '2027-03-31T23:59:59.000Z'],
      ['2027-03-31T00:00:00.5Z', '2027-03-31T00:00:00.500Z'],
      ['2027-03-31T00:00:00-01:30', '2027-03-31T01:30:00.000Z'],
      ['2027-03-31T19:00:00+23:59', '2027-03-30T19:01:00.000Z'],
    ] as const) {
      assert.equal(expiryOf({ expiresAt: text }, NOW)?.toISOString(), iso, text);
    }
    for (const text of [
      'x2027-03-31T00:00:00Z',
      '2027-03-31T00:00:00Zx',
      '2027-03-31T24:00:00Z',
      '2027-03-31T00:60:00Z',
      '2027-03-31T00:00:60Z',
      '2027-03-31T00:00:00+24:00',
      '2027-03-31T00:00:00+02:60',
      '2027-03-31T00:00:00.Z',
      '2027-03-31X00:00:00Z',
      '27-03-31T00:00:00Z',
    ]) {
      assert.throws(() => expiryOf({ expiresAt: text }, NOW), {
        message: `--expires-at must be an RFC 3339 date-time, e.g. 2027-03-31T00:00:00Z; got "${text}"`,
      });
    }
  });

  test('when --expires-in or --expires-at is given, then the expiry is that instant; neither: no expiry', () => {
    assert.equal(expiryOf({ expiresIn: '90d' }, NOW)?.toISOString(), '2027-02-24T12:00:00.000Z');
    assert.equal(
      expiryOf({ expiresAt: '2027-03-31T02:00:00+02:00' }, NOW)?.toISOString(),
      '2027-03-31T00:00:00.000Z',
    );
    assert.equal(expiryOf({}, NOW), undefined);
  });

  for (const [options, message] of [
    [{ expiresAt: '2026-11-26T12:00:00Z' }, /^the expiry 2026-11-26T12:00:00.000Z is not in the future$/],
    [{ expiresAt: '2020-01-01T00:00:00Z' }, /is not in the future/],
    [{ expiresAt: '2027-03-31' }, /^--expires-at must be an RFC 3339 date-time/],
    [{ expiresAt: '2027-03-31T00:00:00' }, /^--expires-at must be an RFC 3339 date-time/],
    [{ expiresAt: '2027-02-30T00:00:00Z' }, /^--expires-at must be an RFC 3339 date-time/],
    [{ expiresAt: 'tomorrow' }, /^--expires-at must be an RFC 3339 date-time/],
    [{ expiresIn: '1d', expiresAt: '2027-03-31T00:00:00Z' }, /^give --expires-in or --expires-at, not both$/],
  ] as const) {
    test(`when the expiry is ${JSON.stringify(options)}, then it is refused`, () => {
      assert.throws(() => expiryOf(options, NOW), { message });
    });
  }

  test('when a key is judged at an instant, then it is active before its expiry, expired from it on, and revoked above all', () => {
    const { record } = newApiKey('t', NOW, { expiresAt: new Date(NOW.getTime() + 1000) });
    assert.equal(keyStatus(record, NOW), 'active');
    assert.equal(keyStatus(record, new Date(NOW.getTime() + 999)), 'active');
    assert.equal(keyStatus(record, new Date(NOW.getTime() + 1000)), 'expired');
    assert.equal(keyStatus({ ...record, revokedAt: NOW }, NOW), 'revoked');
    assert.equal(keyStatus({ ...record, expiresAt: undefined }, new Date('2999-01-01T00:00:00Z')), 'active');
  });

  test('when no scopes are asked for, then a new key has all seven', () => {
    assert.deepEqual(newApiKey('all', NOW).record.scopes, [...API_KEY_SCOPES]);
    assert.deepEqual(newApiKey('one', NOW, { scopes: ['orders:read'] }).record.scopes, ['orders:read']);
  });
});

describe('the key verifier, with its clock in hand', () => {
  let storage: SqliteStorage;
  before(() => {
    storage = new SqliteStorage(':memory:', { timeoutMs: 1_000 });
  });
  after(() => storage.close());

  test('when a stored key reaches its expiry, then it is refused from that instant on, and its use was recorded only while it worked', async () => {
    const clock = { now: NOW };
    const uses: [string, string][] = [];
    const verifier = new ApiKeyVerifier(
      storage.apiKeys,
      [],
      () => clock.now,
      (hash, at) => uses.push([hash, at.toISOString()]),
    );
    const expiresAt = new Date(NOW.getTime() + 60_000);
    const key = newApiKey('expiring', NOW, { scopes: ['pets:read'], expiresAt });
    await storage.apiKeys.insert(key.record);
    assert.deepEqual(await verifier.authenticate(key.secret), {
      apiKeyHash: key.record.hash,
      apiKeyId: key.record.id,
      scopes: ['pets:read'],
    });
    clock.now = new Date(expiresAt.getTime() - 1);
    assert.equal((await verifier.authenticate(key.secret))?.apiKeyHash, key.record.hash);
    clock.now = expiresAt;
    assert.equal(await verifier.authenticate(key.secret), undefined);
    clock.now = new Date(expiresAt.getTime() + 86_400_000);
    assert.equal(await verifier.authenticate(key.secret), undefined);
    assert.deepEqual(uses, [
      [key.record.hash, NOW.toISOString()],
      [key.record.hash, new Date(expiresAt.getTime() - 1).toISOString()],
    ]);
  });

  test('when a configured key (PETSTORE_API_KEYS) is sent, then it has every scope, never expires, and no use is recorded', async () => {
    const uses: string[] = [];
    const verifier = new ApiKeyVerifier(
      storage.apiKeys,
      ['configured-key-0123456789'],
      () => new Date('2999-01-01T00:00:00Z'),
      (hash) => uses.push(hash),
    );
    const caller = verifier.authenticate('configured-key-0123456789');
    assert.ok(!(caller instanceof Promise), 'answered without a promise');
    assert.deepEqual(caller?.scopes, [...API_KEY_SCOPES]);
    // It has no stored id: it is named by its place in PETSTORE_API_KEYS.
    assert.equal(caller?.apiKeyId, 'env:1');
    assert.deepEqual(uses, []);
  });
});

/** The store, counting the reads the verifier makes of it: a bad token must cost none. */
function countingStore(store: ApiKeyStore) {
  const reads = { list: 0, findActiveByHash: 0 };
  const counted: ApiKeyStore = {
    insert: (key) => store.insert(key),
    findActiveByHash: (hash) => {
      reads.findActiveByHash += 1;
      return store.findActiveByHash(hash);
    },
    recordLastUse: (uses) => store.recordLastUse(uses),
    list: () => {
      reads.list += 1;
      return store.list();
    },
    revoke: (id, at) => store.revoke(id, at),
    count: () => store.count(),
    importBatch: (keys) => store.importBatch(keys),
  };
  return { store: counted, reads };
}

/** A new SQLite database in memory for each test of the describe block that calls it, closed after. */
function memoryStorageEach(): () => SqliteStorage {
  let storage: SqliteStorage | undefined;
  beforeEach(() => {
    storage = new SqliteStorage(':memory:', { timeoutMs: 1_000 });
  });
  afterEach(() => storage?.close());
  return () => storage as SqliteStorage;
}

describe('isLiveKey: whether a token from a refused address is a live key', () => {
  const storage = memoryStorageEach();

  test('when a token is empty or longer than 512 characters, then it is not live, answered at once with no read', () => {
    const { store, reads } = countingStore(storage().apiKeys);
    const verifier = new ApiKeyVerifier(store, ['x'.repeat(513)], () => NOW);
    assert.equal(verifier.isLiveKey(''), false);
    // Even a configured key of 513 characters: no key is that long.
    assert.equal(verifier.isLiveKey('x'.repeat(513)), false);
    assert.deepEqual(reads, { list: 0, findActiveByHash: 0 });
  });

  test('when a configured key is sent, then it is live at once (512 characters too), with no read', () => {
    const { store, reads } = countingStore(storage().apiKeys);
    const longest = 'k'.repeat(512);
    const verifier = new ApiKeyVerifier(store, ['configured-key-0123456789', longest], () => NOW);
    assert.equal(verifier.isLiveKey('configured-key-0123456789'), true);
    assert.equal(verifier.isLiveKey(longest), true);
    assert.deepEqual(reads, { list: 0, findActiveByHash: 0 });
  });

  test('when stored keys are asked about, then only active ones are live: not a revoked one, an expired one, or an unknown token', async () => {
    const { store, reads } = countingStore(storage().apiKeys);
    const active = newApiKey('active', NOW);
    const expiring = newApiKey('expiring', NOW, { expiresAt: new Date(NOW.getTime() + 60_000) });
    const expired = newApiKey('expired', NOW, { expiresAt: NOW });
    const revoked = newApiKey('revoked', NOW);
    for (const key of [active, expiring, expired, revoked]) await storage().apiKeys.insert(key.record);
    assert.equal(await storage().apiKeys.revoke(revoked.record.id, NOW), true);
    const verifier = new ApiKeyVerifier(store, ['configured-key-0123456789'], () => NOW);

    const first = verifier.isLiveKey(active.secret);
    assert.ok(first instanceof Promise, 'the first question reads the live keys');
    assert.equal(await first, true);
    assert.equal(reads.list, 1);
    // Within KEY_CACHE_TTL_MS of the read, every answer comes from it, at once.
    assert.equal(verifier.isLiveKey(active.secret), true);
    assert.equal(verifier.isLiveKey(expiring.secret), true);
    assert.equal(verifier.isLiveKey(expired.secret), false);
    assert.equal(verifier.isLiveKey(revoked.secret), false);
    assert.equal(verifier.isLiveKey(`pst_${'A'.repeat(43)}`), false);
    assert.deepEqual(reads, { list: 1, findActiveByHash: 0 });
  });

  test('when an unknown token comes first, then it is not live, and the keys read for it answer the next tokens', async () => {
    const { store, reads } = countingStore(storage().apiKeys);
    const key = newApiKey('stored', NOW);
    await storage().apiKeys.insert(key.record);
    const verifier = new ApiKeyVerifier(store, [], () => NOW);
    assert.equal(await verifier.isLiveKey('not-a-key'), false);
    assert.equal(verifier.isLiveKey(key.secret), true);
    assert.equal(reads.list, 1);
  });

  test('when several tokens arrive while the live keys are being read, then they share that one read', async () => {
    const { store, reads } = countingStore(storage().apiKeys);
    const key = newApiKey('stored', NOW);
    await storage().apiKeys.insert(key.record);
    const verifier = new ApiKeyVerifier(store, [], () => NOW);
    const answers = await Promise.all([
      verifier.isLiveKey(key.secret),
      verifier.isLiveKey('not-a-key'),
      verifier.isLiveKey(key.secret),
    ]);
    assert.deepEqual(answers, [true, false, true]);
    assert.equal(reads.list, 1);
  });

  test('when KEY_CACHE_TTL_MS has passed since the read, then the keys are read again: a key created or revoked since (on another node) is known from then on, not a moment before', async () => {
    const { store, reads } = countingStore(storage().apiKeys);
    const clock = { now: NOW };
    const verifier = new ApiKeyVerifier(store, [], () => clock.now);
    const old = newApiKey('old', NOW);
    await storage().apiKeys.insert(old.record);
    assert.equal(await verifier.isLiveKey(old.secret), true);
    assert.equal(reads.list, 1);

    const created = newApiKey('created elsewhere', NOW);
    await storage().apiKeys.insert(created.record);
    assert.equal(await storage().apiKeys.revoke(old.record.id, NOW), true);
    clock.now = new Date(NOW.getTime() + KEY_CACHE_TTL_MS - 1);
    assert.equal(verifier.isLiveKey(created.secret), false, 'the read is still trusted');
    assert.equal(verifier.isLiveKey(old.secret), true, 'the read is still trusted');
    assert.equal(reads.list, 1);

    clock.now = new Date(NOW.getTime() + KEY_CACHE_TTL_MS);
    const again = verifier.isLiveKey(created.secret);
    assert.ok(again instanceof Promise, 'at KEY_CACHE_TTL_MS the keys are read again');
    assert.equal(await again, true);
    assert.equal(reads.list, 2);
    assert.equal(verifier.isLiveKey(old.secret), false);

    // The next read is trusted for KEY_CACHE_TTL_MS from the instant it was made, and then read again.
    const later = newApiKey('later', NOW);
    await storage().apiKeys.insert(later.record);
    clock.now = new Date(NOW.getTime() + 2 * KEY_CACHE_TTL_MS - 1);
    assert.equal(verifier.isLiveKey(later.secret), false);
    clock.now = new Date(NOW.getTime() + 2 * KEY_CACHE_TTL_MS);
    assert.equal(await verifier.isLiveKey(later.secret), true);
    assert.equal(reads.list, 3);
  });

  test('when a key expires between reads, then it is live until the read made at or after its expiry', async () => {
    const { store } = countingStore(storage().apiKeys);
    const clock = { now: NOW };
    const verifier = new ApiKeyVerifier(store, [], () => clock.now);
    const key = newApiKey('short', NOW, { expiresAt: new Date(NOW.getTime() + KEY_CACHE_TTL_MS) });
    await storage().apiKeys.insert(key.record);
    assert.equal(await verifier.isLiveKey(key.secret), true);
    clock.now = new Date(NOW.getTime() + KEY_CACHE_TTL_MS);
    assert.equal(await verifier.isLiveKey(key.secret), false);
  });

  test('when a verifier has no clock of its own, then it judges by the time of day', async () => {
    const { store } = countingStore(storage().apiKeys);
    const future = newApiKey('future', NOW, { expiresAt: new Date('2999-01-01T00:00:00Z') });
    const past = newApiKey('past', new Date('2000-01-01T00:00:00Z'), {
      expiresAt: new Date('2000-01-02T00:00:00Z'),
    });
    for (const key of [future, past]) await storage().apiKeys.insert(key.record);
    const uses: number[] = [];
    const verifier = new ApiKeyVerifier(store, [], undefined, (_hash, at) => uses.push(at.getTime()));
    assert.equal(await verifier.isLiveKey(future.secret), true);
    assert.equal(verifier.isLiveKey(past.secret), false);
    const before = Date.now();
    assert.equal((await verifier.authenticate(future.secret))?.apiKeyId, future.record.id);
    assert.equal(await verifier.authenticate(past.secret), undefined);
    const after = Date.now();
    assert.equal(uses.length, 1);
    assert.ok(uses[0] !== undefined && uses[0] >= before && uses[0] <= after, `the use at ${uses[0]}`);
  });
});

describe('stillLive: which callers authenticated earlier are still live keys', () => {
  const storage = memoryStorageEach();

  test('when only configured keys are asked about, then they are live, with no read', async () => {
    const { store, reads } = countingStore(storage().apiKeys);
    const verifier = new ApiKeyVerifier(store, ['configured-key-0123456789'], () => NOW);
    const configured = hashApiKey('configured-key-0123456789');
    assert.deepEqual(await verifier.stillLive([configured]), new Set([configured]));
    assert.deepEqual(await verifier.stillLive([]), new Set());
    assert.equal(reads.list, 0);
  });

  test('when stored keys are asked about, then the active ones are live by the verifier clock, read from the store every time: not a revoked, expired or unknown one', async () => {
    const { store, reads } = countingStore(storage().apiKeys);
    const clock = { now: NOW };
    const verifier = new ApiKeyVerifier(store, ['configured-key-0123456789'], () => clock.now);
    const active = newApiKey('active', NOW);
    const expiring = newApiKey('expiring', NOW, { expiresAt: new Date(NOW.getTime() + 1) });
    const revoked = newApiKey('revoked', NOW);
    for (const key of [active, expiring, revoked]) await storage().apiKeys.insert(key.record);
    await storage().apiKeys.revoke(revoked.record.id, NOW);
    const configured = hashApiKey('configured-key-0123456789');
    const unknown = hashApiKey('not-a-key');
    const asked = [configured, active.record.hash, expiring.record.hash, revoked.record.hash, unknown];
    assert.deepEqual(
      await verifier.stillLive(asked),
      new Set([configured, active.record.hash, expiring.record.hash]),
    );
    assert.equal(reads.list, 1);
    clock.now = new Date(NOW.getTime() + 1);
    await storage().apiKeys.revoke(active.record.id, NOW);
    assert.deepEqual(await verifier.stillLive(asked), new Set([configured]), 'no earlier read is remembered');
    assert.equal(reads.list, 2);
  });
});

describe('authenticate: a token that cannot be a key', () => {
  test('when a token is empty or longer than 512 characters, then it is refused at once, with no lookup; 512 characters are looked up', async () => {
    const storage = new SqliteStorage(':memory:', { timeoutMs: 1_000 });
    try {
      const { store, reads } = countingStore(storage.apiKeys);
      const verifier = new ApiKeyVerifier(store, [], () => NOW);
      assert.equal(verifier.authenticate(''), undefined);
      assert.equal(verifier.authenticate('x'.repeat(513)), undefined);
      assert.equal(reads.findActiveByHash, 0);
      const longest = verifier.authenticate('x'.repeat(512));
      assert.ok(longest instanceof Promise);
      assert.equal(await longest, undefined);
      assert.equal(reads.findActiveByHash, 1);
    } finally {
      await storage.close();
    }
  });
});

describe('ensureFirstApiKey: the key the first start creates', () => {
  const storage = memoryStorageEach();

  test('when no key exists and none is configured, then one key with every scope is stored and its secret returned; the next start creates none', async () => {
    const secret = await ensureFirstApiKey(storage().apiKeys, [], NOW);
    assert.match(secret ?? '', /^pst_[A-Za-z0-9_-]{43}$/);
    const keys = await storage().apiKeys.list();
    assert.equal(keys.length, 1);
    assert.deepEqual(
      {
        name: keys[0]?.name,
        hash: keys[0]?.hash,
        scopes: keys[0]?.scopes,
        createdAt: keys[0]?.createdAt.toISOString(),
        expiresAt: keys[0]?.expiresAt,
      },
      {
        name: 'first key (created at first start)',
        hash: hashApiKey(secret ?? ''),
        scopes: [...API_KEY_SCOPES],
        createdAt: NOW.toISOString(),
        expiresAt: undefined,
      },
    );
    assert.equal(await ensureFirstApiKey(storage().apiKeys, [], NOW), undefined);
    assert.equal(await storage().apiKeys.count(), 1);
  });

  test('when a key is configured (PETSTORE_API_KEYS), then none is created, even in an empty store', async () => {
    assert.equal(await ensureFirstApiKey(storage().apiKeys, ['configured-key-0123456789'], NOW), undefined);
    assert.equal(await storage().apiKeys.count(), 0);
  });

  test('when a stored key exists, even a revoked one, then none is created', async () => {
    const key = newApiKey('existing', NOW);
    await storage().apiKeys.insert(key.record);
    await storage().apiKeys.revoke(key.record.id, NOW);
    assert.equal(await ensureFirstApiKey(storage().apiKeys, [], NOW), undefined);
    assert.deepEqual(
      (await storage().apiKeys.list()).map((stored) => stored.id),
      [key.record.id],
    );
  });
});
