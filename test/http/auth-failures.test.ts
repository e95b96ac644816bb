import assert from 'node:assert/strict';
import { after, before, describe, test } from '../support/backends.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

const FAILURES_PER_MINUTE = 5;
const BAD_KEY = 'pst_not-a-key-0123456789';

describe('failed authentications per client address', () => {
  let server: TestServer;
  let direct: TestServer;
  const from = (address: string) => ({ 'x-forwarded-for': address });
  // The first server's clock stands still unless a test moves it: a wait is then an exact figure.
  let clock = Date.parse('2026-01-01T00:00:00Z');

  before(async () => {
    server = await startTestServer({
      env: { AUTH_FAILURES_PER_MINUTE: String(FAILURES_PER_MINUTE), TRUSTED_PROXIES: '127.0.0.1' },
      now: () => new Date(clock),
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
      // 5 a minute: the bucket gains a token every 12 s, and the clock has not moved.
      assert.equal(res.headers.get('retry-after'), '12', 'Retry-After in seconds');
    }
    clock += 11_999;
    const early = await server.request('GET', '/v1/pets', { headers: from('203.0.113.7') });
    assert.equal(early.headers.get('retry-after'), '1', 'a wait under a second is still one second');
    clock += 1;
    const waited = await server.request('GET', '/v1/pets', { headers: from('203.0.113.7') });
    assert.equal(waited.status, 200, 'after Retry-After, the address is served again');
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
