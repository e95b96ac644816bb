import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { newApiKey } from '../../src/domain/api-keys.js';
import { after, backends, before, type TestDatabase, test } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { nextHref, type PetBody, toPath } from '../support/paging.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

/**
 * The documented bound: a revocation reaches every node within 2 s (a node trusts a key it found active
 * for that long). The nodes' clock is moved by exactly this much, so the bound is shown without racing it.
 */
const REVOCATION_BOUND_MS = 2_000;

/** Moves the nodes' shared clock forward. */
const advance = (clock: { now: Date }, ms: number) => {
  clock.now = new Date(clock.now.getTime() + ms);
};

for (const backend of backends) {
  backend.describe(`two nodes on one database (${backend.name})`, () => {
    let database: TestDatabase;
    let nodes: [TestServer, TestServer];

    before(async () => {
      database = await backend.create();
      nodes = [await startTestServer({ database }), await startTestServer({ database })];
    });
    after(async () => {
      for (const node of nodes ?? []) await node.close();
      await database?.drop();
    });

    test('when both nodes take creates at once, then every id is unique and both list them all', async () => {
      const responses = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          (nodes[i % 2] as TestServer).request('POST', '/v1/pets', {
            body: { name: `concurrent-${i}`, categoryId: i },
          }),
        ),
      );
      for (const res of responses) assert.equal(res.status, 201, res.text);
      const ids = responses.map((res) => res.json<PetBody>().id);
      assert.equal(new Set(ids).size, ids.length, 'no id was handed out twice');

      for (const node of nodes) {
        const listed = (await node.request('GET', '/v1/pets?limit=100')).json<PetBody[]>().map((p) => p.id);
        for (const id of ids) assert.ok(listed.includes(id), `pet ${id} is listed by ${node.url}`);
      }
    });

    test('when a pet is created through one node, then the other returns it at once', async () => {
      const [first, second] = nodes;
      // Raw JSON: a categoryId beyond 2^53 must cross nodes exactly.
      const res = await first.request('POST', '/v1/pets', {
        body: '{"name":"seen everywhere","categoryId":9007199254740993,"status":"pending"}',
      });
      assert.equal(res.status, 201, res.text);
      const pet = res.exact<{ id: number }>();

      const fetched = await second.request('GET', `/v1/pets/${pet.id}`);
      assert.equal(fetched.status, 200, fetched.text);
      assert.deepEqual(fetched.exact(), pet);
      const pending = (await second.request('GET', '/v1/pets?status=pending&limit=100')).exact<unknown[]>();
      assert.deepEqual(pending.at(-1), pet);
    });

    test('when a walk starts on one node, then its next links work on the other', async () => {
      for (let i = 0; i < 5; i++) {
        const res = await nodes[0].request('POST', '/v1/pets', {
          body: { name: `walk-${i}`, categoryId: i, status: 'sold' },
        });
        assert.equal(res.status, 201, res.text);
      }
      const everything = (await nodes[0].request('GET', '/v1/pets?status=sold&limit=100')).json<PetBody[]>();
      assert.ok(everything.length >= 5);

      const seen: PetBody[] = [];
      let path: string | undefined = '/v1/pets?status=sold&limit=2';
      for (let page = 0; path !== undefined; page++) {
        // Alternate nodes page by page: every cursor followed was issued by the other node.
        const res = await (nodes[page % 2] as TestServer).request('GET', path);
        assert.equal(res.status, 200, res.text);
        seen.push(...res.json<PetBody[]>());
        const href = nextHref(res);
        path = href === undefined ? undefined : toPath(href);
      }
      assert.deepEqual(seen, everything);
    });

    test('when the same key races on both nodes at once, then one pet is created and both nodes answer it', async () => {
      for (let round = 0; round < 5; round++) {
        const key = `race-${randomUUID()}`;
        const before = await nodes[0].storage.pets.count();
        const answers = await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            (nodes[i % 2] as TestServer).request('POST', '/v1/pets', {
              body: { name: `raced-${round}`, categoryId: round },
              headers: { 'Idempotency-Key': key },
            }),
          ),
        );
        for (const answer of answers) assert.equal(answer.status, 201, answer.text);
        assert.equal(new Set(answers.map((a) => a.text)).size, 1, `round ${round}: one pet in every answer`);
        assert.equal(new Set(answers.map((a) => a.headers.get('location'))).size, 1);
        assert.equal(await nodes[1].storage.pets.count(), before + 1, `round ${round}: one pet stored`);
      }
    });
  });
}

/** The node refuses `key` on the first ask: no waiting, the clock has already passed the bound. */
async function assertRefused(node: TestServer, key: string): Promise<void> {
  const res = await node.request('GET', '/v1/pets?limit=1', { key });
  assert.equal(res.status, 401, `${node.url} still accepts the revoked key: ${res.text}`);
}

for (const backend of backends) {
  backend.describe(`key lifetimes and scopes on two nodes, one clock (${backend.name})`, () => {
    const clock = { now: new Date('2026-11-26T12:00:00.000Z') };
    let database: TestDatabase;
    let nodes: [TestServer, TestServer];

    before(async () => {
      database = await backend.create();
      const now = () => clock.now;
      nodes = [await startTestServer({ database, now }), await startTestServer({ database, now })];
    });
    after(async () => {
      for (const node of nodes ?? []) await node.close();
      await database?.drop();
    });

    test('when a key remembered as active by both nodes reaches its expiry, then both refuse it from that instant, without waiting out the cache', async () => {
      const expiresAt = new Date(clock.now.getTime() + 60_000);
      const key = newApiKey('expires on two nodes', clock.now, { scopes: ['pets:read'], expiresAt });
      await nodes[0].storage.apiKeys.insert(key.record);
      for (const node of nodes) {
        // Twice: on PostgreSQL the second answer comes from the node's key cache.
        assert.equal((await node.request('GET', '/v1/pets', { key: key.secret })).status, 200);
        assert.equal((await node.request('GET', '/v1/pets', { key: key.secret })).status, 200);
      }
      clock.now = expiresAt;
      for (const node of nodes) {
        const res = await node.request('GET', '/v1/pets', { key: key.secret });
        assert.equal(res.status, 401, `${node.url}: ${res.text}`);
        assert.equal(
          res.headers.get('www-authenticate'),
          'Bearer realm="animal-store", error="invalid_token"',
        );
      }
    });

    test('when a scoped key is revoked on one node, then both nodes refuse it within the bound, and until then neither lets it past its scope', async () => {
      const key = newApiKey('scoped on two nodes', clock.now, { scopes: ['orders:read'] });
      await nodes[1].storage.apiKeys.insert(key.record);
      for (const node of nodes) {
        assert.equal((await node.request('GET', '/v1/store/orders', { key: key.secret })).status, 200);
        const write = await node.request('POST', '/v1/pets', {
          key: key.secret,
          body: { name: 'x', categoryId: 1 },
        });
        assert.equal(write.status, 403, write.text);
      }
      // Racing: revoked through one node while both are being asked.
      const [revoked] = await Promise.all([
        nodes[0].storage.apiKeys.revoke(key.record.id, new Date()),
        ...nodes.map((node) => node.request('GET', '/v1/store/orders', { key: key.secret })),
      ]);
      assert.equal(revoked, true);
      // Until the bound, a node may still trust what it remembered, but never past the key's scope.
      advance(clock, REVOCATION_BOUND_MS - 1);
      for (const node of nodes) {
        const write = await node.request('POST', '/v1/pets', {
          key: key.secret,
          body: { name: 'x', categoryId: 1 },
        });
        assert.ok(write.status === 403 || write.status === 401, `${node.url}: ${write.text}`);
      }
      advance(clock, 1);
      for (const node of nodes) await assertRefused(node, key.secret);
    });

    test('when a key is revoked with the command line, then both nodes refuse it once 2 s have passed on their clock', async () => {
      const key = newApiKey('revoked by the command line', clock.now);
      await nodes[0].storage.apiKeys.insert(key.record);
      for (const node of nodes) {
        // Twice: on PostgreSQL the second answer comes from the node's key cache.
        assert.equal((await node.request('GET', '/v1/pets', { key: key.secret })).status, 200);
        assert.equal((await node.request('GET', '/v1/pets', { key: key.secret })).status, 200);
      }

      // Another process: neither node's cache is told.
      const revoke = await runCli(['keys', 'revoke', key.record.id], { DATABASE_URL: database.url });
      assert.equal(revoke.code, 0, revoke.stderr);

      advance(clock, REVOCATION_BOUND_MS);
      for (const node of nodes) await assertRefused(node, key.secret);
    });
  });
}
