import assert from 'node:assert/strict';
import {
  ApiKeyVerifier,
  newApiKey,
  REFUSED_KEY_LIMIT,
  REFUSED_KEY_TTL_MS,
} from '../../src/domain/api-keys.js';
import type { ApiKeyStore } from '../../src/domain/storage.js';
import { after, backends, before, describe, test } from '../support/backends.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

const FAILURES_PER_MINUTE = 5;
const BAD_KEY = 'pst_not-a-key-0123456789';

for (const backend of backends) {
  backend.describe(`refused keys (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ backend });
    });
    after(() => server.close());

    /** The real store, with its key lookups counted. */
    function countingStore(): { store: ApiKeyStore; lookups: () => number } {
      let lookups = 0;
      const real = server.storage.apiKeys;
      const store: ApiKeyStore = Object.create(real);
      store.findActiveByHash = (hash) => {
        lookups++;
        return real.findActiveByHash(hash);
      };
      return { store, lookups: () => lookups };
    }

    test('when one unknown key is sent again and again, then the database is asked once per refusal period', async () => {
      let now = 1_000_000;
      const { store, lookups } = countingStore();
      const verifier = new ApiKeyVerifier(store, [], () => now);
      for (let i = 0; i < 100; i++) assert.equal(await verifier.authenticate(BAD_KEY), undefined);
      assert.equal(lookups(), 1);
      now += REFUSED_KEY_TTL_MS + 1;
      assert.equal(await verifier.authenticate(BAD_KEY), undefined);
      assert.equal(lookups(), 2, 'asked again once the refusal expired');
    });

    test('when a key refused a moment ago is created, then it works once the refusal period has passed', async () => {
      let now = 2_000_000;
      const { store } = countingStore();
      const verifier = new ApiKeyVerifier(store, [], () => now);
      const key = newApiKey('late', new Date());
      assert.equal(await verifier.authenticate(key.secret), undefined);
      await server.storage.apiKeys.insert(key.record);
      now += REFUSED_KEY_TTL_MS + 1;
      assert.equal(await verifier.authenticate(key.secret), key.record.hash);
    });

    test('when more distinct unknown keys arrive than the refusal memory holds, then it starts over instead of growing', async () => {
      const { store, lookups } = countingStore();
      const verifier = new ApiKeyVerifier(store, [], () => 3_000_000);
      for (let i = 0; i <= REFUSED_KEY_LIMIT; i++) await verifier.authenticate(`pst_unknown-${i}-0123456789`);
      assert.equal(lookups(), REFUSED_KEY_LIMIT + 1);
      // The memory was full at the last one, so it started over: the first key is looked up again.
      await verifier.authenticate('pst_unknown-0-0123456789');
      assert.equal(lookups(), REFUSED_KEY_LIMIT + 2);
    });
  });
}

describe('failed authentications per client address', () => {
  let server: TestServer;
  let direct: TestServer;
  const from = (address: string) => ({ 'x-forwarded-for': address });

  before(async () => {
    server = await startTestServer({
      env: { AUTH_FAILURES_PER_MINUTE: String(FAILURES_PER_MINUTE), TRUSTED_PROXIES: '127.0.0.1' },
    });
    direct = await startTestServer({ env: { AUTH_FAILURES_PER_MINUTE: String(FAILURES_PER_MINUTE) } });
  });
  after(async () => {
    await server.close();
    await direct.close();
  });

  test('when an address fails too often, then its requests get 429 with Retry-After, even with a valid key, while other addresses are served', async () => {
    for (let i = 0; i < FAILURES_PER_MINUTE; i++) {
      const res = await server.request('GET', '/v1/pets', { key: BAD_KEY, headers: from('203.0.113.7') });
      assert.equal(res.status, 401, `failure ${i}`);
    }
    for (const key of [BAD_KEY, TEST_KEY, null]) {
      const res = await server.request('GET', '/v1/pets', { key, headers: from('203.0.113.7') });
      assert.equal(res.status, 429, res.text);
      assert.equal(res.json<{ code: string }>().code, 'rate_limited');
      assert.match(res.json<{ message: string }>().message, /failed authentications/);
      assert.ok(Number(res.headers.get('retry-after')) >= 1, 'Retry-After in seconds');
    }
    const other = await server.request('GET', '/v1/pets', { headers: from('198.51.100.9') });
    assert.equal(other.status, 200, 'another client address is not affected');
    const probe = await server.request('GET', '/healthz', { key: null, headers: from('203.0.113.7') });
    assert.equal(probe.status, 200, 'probes are outside /v1 and never limited');
  });

  test('when no proxy is trusted, then X-Forwarded-For is ignored and cannot dodge the limit', async () => {
    for (let i = 0; i < FAILURES_PER_MINUTE; i++) {
      const res = await direct.request('GET', '/v1/pets', { key: BAD_KEY, headers: from(`192.0.2.${i}`) });
      assert.equal(res.status, 401);
    }
    const res = await direct.request('GET', '/v1/pets', { key: TEST_KEY, headers: from('192.0.2.200') });
    assert.equal(res.status, 429, 'every attempt came from 127.0.0.1, whatever the header said');
  });
});
