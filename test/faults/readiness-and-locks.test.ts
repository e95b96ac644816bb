import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { READY_ANSWER_MAX_AGE_MS } from '../../src/http/routes/health.js';
import { after, backends, before, describe, sqlite, test } from '../support/backends.js';
import { executeSql } from '../support/db-inspect.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

for (const backend of backends) {
  backend.describe(`/readyz under a flood of probes (${backend.name})`, () => {
    let server: TestServer;
    let clock = new Date('2026-06-01T00:00:00Z').getTime();

    before(async () => {
      server = await startTestServer({ backend, now: () => new Date(clock) });
    });
    after(() => server.close());

    test('when many callers probe within a second, then one probe answers them all, and the next second probes again', async () => {
      const ready = () => server.request('GET', '/readyz', { key: null });
      assert.equal((await ready()).status, 200);
      // A probe now would fail: every answer that is still 200 is the last probe's, shared.
      await executeSql(server.database.url, 'ALTER TABLE readiness_probe RENAME TO readiness_probe_away');
      try {
        clock += READY_ANSWER_MAX_AGE_MS - 1;
        const flood = await Promise.all(Array.from({ length: 50 }, ready));
        assert.deepEqual(
          flood.map((res) => res.status),
          flood.map(() => 200),
        );
        assert.deepEqual(flood[0]?.json(), { status: 'ready' });
        clock += 1;
        const stale = await Promise.all(Array.from({ length: 20 }, ready));
        assert.deepEqual(
          stale.map((res) => res.status),
          stale.map(() => 503),
          'a second after the last probe, the database is probed again (and now fails)',
        );
      } finally {
        await executeSql(server.database.url, 'ALTER TABLE readiness_probe_away RENAME TO readiness_probe');
      }
      clock += READY_ANSWER_MAX_AGE_MS;
      assert.equal((await ready()).status, 200);
    });
  });
}

describe('a SQLite write lock held by another process', () => {
  let server: TestServer;
  const holder = fileURLToPath(new URL('../support/hold-sqlite-lock.ts', import.meta.url));

  before(async () => {
    // A long bound: a wait for the lock on the event loop's thread would stall everything for that long.
    server = await startTestServer({ backend: sqlite, env: { DATABASE_TIMEOUT_MS: '20000' } });
  });
  after(() => server.close());

  test('when a create waits for the lock, then /healthz, /metrics and reads are answered meanwhile, and the create succeeds once the lock is let go', async () => {
    const lock = spawn(
      process.execPath,
      ['--import', 'tsx', holder, server.database.url.slice('sqlite:'.length)],
      {
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    );
    try {
      const [said] = (await once(lock.stdout, 'data')) as [Buffer];
      assert.equal(said.toString(), 'locked\n');
      let createSettled = false;
      const create = server
        .request('POST', '/v1/pets', { body: { name: 'Waited', categoryId: 1 } })
        .finally(() => {
          createSettled = true;
        });
      // Let the create reach the database and meet the lock before anything else is asked.
      await new Promise((resolve) => setTimeout(resolve, 200));
      for (const path of ['/healthz', '/metrics', '/v1/pets?limit=1']) {
        const res = await server.request('GET', path);
        assert.equal(res.status, 200, `${path}: ${res.text}`);
        assert.equal(createSettled, false, `${path} was answered only after the create gave up`);
      }
      lock.stdin.end();
      const created = await create;
      assert.equal(created.status, 201, created.text);
      assert.equal(created.json<{ name: string }>().name, 'Waited');
    } finally {
      lock.kill();
    }
  });
});
