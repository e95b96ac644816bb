import assert from 'node:assert/strict';
import { newApiKey } from '../../src/domain/api-keys.js';
import { after, before, httpLayerBackends, test } from '../support/backends.js';
import { executeSql } from '../support/db-inspect.js';
import { assertError } from '../support/error-body.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

const FAILURES_PER_MINUTE = 5;
/** One token back every 60/5 s: an address that used them all waits that long for the next. */
const REFILL_SECONDS = 60 / FAILURES_PER_MINUTE;
const BAD_KEY = 'pst_not-a-key-0123456789';
const from = (address: string) => ({ 'x-forwarded-for': address });

/** Uses up `address`'s failures with a bad key, each a 401. */
async function exhaust(server: TestServer, address: string): Promise<void> {
  for (let i = 0; i < FAILURES_PER_MINUTE; i++) {
    const res = await server.request('GET', '/v1/pets', { key: BAD_KEY, headers: from(address) });
    assert.equal(res.status, 401, `failure ${i}`);
  }
}

function assertTooMany(res: Awaited<ReturnType<TestServer['request']>>): void {
  // The servers' clocks stand still: the wait is the whole refill of one token, exactly.
  assertError(
    res,
    429,
    'rate_limited',
    `too many failed authentications from this address; retry after ${REFILL_SECONDS} s`,
  );
  assert.equal(res.headers.get('retry-after'), String(REFILL_SECONDS));
}

for (const backend of httpLayerBackends) {
  backend.describe(`failed authentications per client address (${backend.name})`, () => {
    let server: TestServer;
    let direct: TestServer;
    // The limiter reads the service's clock: it stands still unless a test moves it.
    let clock = Date.parse('2026-06-01T00:00:00Z');
    const now = () => new Date(clock);
    const stored = newApiKey('auth-failures test', now());

    before(async () => {
      server = await startTestServer({
        backend,
        now,
        env: { AUTH_FAILURES_PER_MINUTE: String(FAILURES_PER_MINUTE), TRUSTED_PROXIES: '127.0.0.1' },
      });
      await server.storage.apiKeys.insert(stored.record);
      direct = await startTestServer({
        backend,
        now,
        env: { AUTH_FAILURES_PER_MINUTE: String(FAILURES_PER_MINUTE) },
      });
    });
    after(async () => {
      await server.close();
      await direct.close();
    });

    test('when an address fails too often, then its bad keys get 429 with Retry-After, while valid keys from it are served and other addresses are not affected', async () => {
      await exhaust(server, '203.0.113.7');
      assertTooMany(await server.request('GET', '/v1/pets', { key: BAD_KEY, headers: from('203.0.113.7') }));
      assertTooMany(
        await server.request('GET', '/v1/pets', { key: 'pst_another-bad-one', headers: from('203.0.113.7') }),
      );
      for (const key of [TEST_KEY, stored.secret]) {
        const res = await server.request('GET', '/v1/pets', { key, headers: from('203.0.113.7') });
        assert.equal(res.status, 200, `a valid key is served from the refused address: ${res.text}`);
      }
      const anonymous = await server.request('GET', '/v1/pets', { key: null, headers: from('203.0.113.7') });
      assert.equal(anonymous.status, 401, 'no key at all is a 401, not a 429');
      const other = await server.request('GET', '/v1/pets', { key: BAD_KEY, headers: from('198.51.100.9') });
      assert.equal(other.status, 401, 'another client address is not affected');
      const probe = await server.request('GET', '/healthz', { key: null, headers: from('203.0.113.7') });
      assert.equal(probe.status, 200, 'probes are outside /v1 and never limited');
    });

    test('when the Retry-After has passed, then the address may fail again, and not before', async () => {
      await exhaust(server, '203.0.113.9');
      clock += REFILL_SECONDS * 1000 - 1;
      const early = await server.request('GET', '/v1/pets', { key: BAD_KEY, headers: from('203.0.113.9') });
      assert.deepEqual([early.status, early.headers.get('retry-after')], [429, '1']);
      clock += 1;
      const waited = await server.request('GET', '/v1/pets', { key: BAD_KEY, headers: from('203.0.113.9') });
      assert.equal(waited.status, 401, 'one more try, answered as any bad key');
    });

    test('when an address sends many requests with no key, then they are never counted: a valid key from it is served', async () => {
      for (let i = 0; i < 6 * FAILURES_PER_MINUTE; i++) {
        const res = await server.request('GET', '/v1/pets', { key: null, headers: from('192.0.2.50') });
        assert.equal(res.status, 401, `anonymous request ${i}`);
      }
      const res = await server.request('GET', '/v1/pets', {
        key: stored.secret,
        headers: from('192.0.2.50'),
      });
      assert.equal(res.status, 200, res.text);
      const bad = await server.request('GET', '/v1/pets', { key: BAD_KEY, headers: from('192.0.2.50') });
      assert.equal(bad.status, 401, 'the anonymous requests used none of its failures');
    });

    test('when no proxy is trusted, then X-Forwarded-For is ignored and cannot dodge the limit', async () => {
      for (let i = 0; i < FAILURES_PER_MINUTE; i++) {
        const res = await direct.request('GET', '/v1/pets', { key: BAD_KEY, headers: from(`192.0.2.${i}`) });
        assert.equal(res.status, 401);
      }
      assertTooMany(await direct.request('GET', '/v1/pets', { key: BAD_KEY, headers: from('192.0.2.200') }));
    });
  });

  backend.describe(`a refused address's bad keys cost no lookup (${backend.name})`, () => {
    let server: TestServer;
    const stored = newApiKey('lookup test', new Date('2026-01-01T00:00:00Z'));
    // A clock that stands still: the set of live keys, once read, stays trusted for the whole test.
    const now = () => new Date('2026-06-01T00:00:00Z');

    before(async () => {
      server = await startTestServer({
        backend,
        now,
        env: { AUTH_FAILURES_PER_MINUTE: String(FAILURES_PER_MINUTE), TRUSTED_PROXIES: '127.0.0.1' },
      });
      await server.storage.apiKeys.insert(stored.record);
    });
    after(() => server.close());

    test('when the key table is taken away after an address was refused, then 40 different bad tokens from it still get 429 and a valid key is still recognised', async () => {
      await exhaust(server, '203.0.113.8');
      const first = await server.request('GET', '/v1/pets', {
        key: stored.secret,
        headers: from('203.0.113.8'),
      });
      assert.equal(first.status, 200, first.text);
      // From now on any lookup of a key would fail (500 or 503): a 429 proves none was made.
      await executeSql(server.database.url, 'ALTER TABLE api_keys RENAME TO api_keys_away');
      try {
        for (let i = 0; i < 40; i++) {
          const res = await server.request('GET', '/v1/pets', {
            key: `pst_guess-${i}`,
            headers: from('203.0.113.8'),
          });
          assertTooMany(res);
        }
        const configured = await server.request('GET', '/v1/pets', {
          key: TEST_KEY,
          headers: from('203.0.113.8'),
        });
        assert.equal(configured.status, 200, configured.text);
      } finally {
        await executeSql(server.database.url, 'ALTER TABLE api_keys_away RENAME TO api_keys');
      }
    });
  });
}
