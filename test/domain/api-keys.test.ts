import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  API_KEY_SCOPES,
  ApiKeyVerifier,
  expiryOf,
  keyStatus,
  newApiKey,
  parseDuration,
  parseScopes,
} from '../../src/domain/api-keys.js';
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
