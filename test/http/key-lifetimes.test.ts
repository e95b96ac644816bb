import assert from 'node:assert/strict';
import { newApiKey } from '../../src/domain/api-keys.js';
import { after, backends, before, test } from '../support/backends.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

const INVALID_TOKEN = 'Bearer realm="animal-store", error="invalid_token"';
const START = new Date('2026-11-26T12:00:00.000Z');

for (const backend of backends) {
  backend.describe(`key expiry and last use, with the clock injected (${backend.name})`, () => {
    const clock = { now: START };
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ backend, now: () => clock.now });
    });
    after(() => server.close());

    test('when a key reaches its expiry, then from that instant it gets the very answer an unknown key gets', async () => {
      clock.now = START;
      const expiresAt = new Date(START.getTime() + 90 * 86_400_000);
      const key = newApiKey('a season', START, { scopes: ['pets:read'], expiresAt });
      await server.storage.apiKeys.insert(key.record);
      assert.equal((await server.request('GET', '/v1/pets', { key: key.secret })).status, 200);
      clock.now = new Date(expiresAt.getTime() - 1);
      assert.equal(
        (await server.request('GET', '/v1/pets', { key: key.secret })).status,
        200,
        'a millisecond before',
      );

      clock.now = expiresAt;
      const expired = await server.request('GET', '/v1/pets', { key: key.secret });
      const unknown = await server.request('GET', '/v1/pets', { key: 'pst_nobodysKey0123456789' });
      for (const res of [expired, unknown]) {
        assert.equal(res.status, 401);
        assert.equal(res.headers.get('www-authenticate'), INVALID_TOKEN);
      }
      assert.deepEqual(expired.json(), unknown.json());
      assert.deepEqual(expired.json(), {
        code: 'unauthorized',
        message: 'the API key is not valid',
        status: 401,
      });
      // A write it never had the scope for is refused as unknown too: expiry comes before scopes.
      const write = await server.request('POST', '/v1/pets', {
        key: key.secret,
        body: { name: 'x', categoryId: 1 },
      });
      assert.equal(write.status, 401);
      clock.now = START; // the clock, not a stored state, decides: back before the expiry it works again
      assert.equal((await server.request('GET', '/v1/pets', { key: key.secret })).status, 200);
    });

    test('when keys are used, then nothing is written per request, and the last use of each is stored when the service closes', async () => {
      const used = newApiKey('used', START);
      const idle = newApiKey('idle', START);
      for (const key of [used, idle]) await server.storage.apiKeys.insert(key.record);
      for (const [second, path] of [
        [1, '/v1/pets'],
        [30, '/v1/store/orders'],
        [59, '/v1/pets?limit=1'],
      ] as const) {
        clock.now = new Date(START.getTime() + second * 1000);
        assert.equal((await server.request('GET', path, { key: used.secret })).status, 200);
      }
      const before = await server.storage.apiKeys.list();
      assert.equal(
        before.find((k) => k.id === used.record.id)?.lastUsedAt,
        undefined,
        'not on the request path',
      );

      await server.app.close(); // flushes, before the storage is closed
      const after = new Map((await server.storage.apiKeys.list()).map((k) => [k.id, k.lastUsedAt]));
      assert.equal(after.get(used.record.id)?.toISOString(), '2026-11-26T12:00:59.000Z');
      assert.equal(after.get(idle.record.id), undefined);
    });
  });
}
