import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { buildApp } from '../../src/app.js';
import { LISTEN_SECRET_FILE, listenSecret } from '../../src/cli/listen.js';
import { openStorage } from '../../src/storage/open-storage.js';
import { sqlite, type TestDatabase } from '../support/backends.js';
import { CliProcess, killAllCliProcesses } from '../support/cli.js';
import { freePort } from '../support/free-port.js';
import { TEST_KEY, testConfig } from '../support/test-server.js';
import { verified, WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * `petstore listen --forward-to`: a real `petstore listen` process between a node of the service and a
 * receiver verifying with the reference Standard Webhooks library. The node is restarted mid-way (the
 * stream breaks and is opened again), a pet's delivery is answered with a redirect, and Ctrl-C ends it.
 */

after(() => killAllCliProcesses());

/** The service on a port known in advance, so that it can be started again at the same address. */
async function startNode(database: TestDatabase, port: number) {
  const config = testConfig(database.url);
  const storage = await openStorage(config);
  const app = await buildApp({ config, storage });
  await app.listen({ host: '127.0.0.1', port });
  const url = `http://127.0.0.1:${port}`;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${TEST_KEY}`,
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, text: await res.text() };
  };
  return {
    url,
    storage,
    call,
    createPet: async (name: string) =>
      JSON.parse((await call('POST', '/v1/pets', { name, categoryId: 1 })).text).id as number,
    close: async () => {
      await app.close();
      await storage.close();
    },
  };
}

test('when a folder has no listen secret yet, then one is made (whsec_, 32 bytes, 0600) and kept for the next start', () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-listen-'));
  try {
    const secret = listenSecret(dir);
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(secret.slice(6), 'base64').length, 32);
    assert.equal(statSync(join(dir, LISTEN_SECRET_FILE)).mode & 0o777, 0o600);
    assert.equal(listenSecret(dir), secret);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('when petstore listen forwards to a receiver and the node restarts mid-way, then the receiver verifies every event of the types asked once, webhook-id its id, the body as getEvent sends it; a redirect is reported, not followed; Ctrl-C exits 0', async (t) => {
  const database = await sqlite.create();
  t.after(() => database.drop());
  const port = await freePort();
  let node = await startNode(database, port);
  t.after(() => node.close());
  const elsewhere = await WebhookReceiver.start();
  t.after(() => elsewhere.close());
  const receiver = await WebhookReceiver.start();
  t.after(() => receiver.close());
  receiver.answer(({ body }) =>
    body.includes('"name":"Redirect"')
      ? { status: 302, headers: { location: elsewhere.url() } }
      : { status: 204 },
  );
  // Before listen starts: not forwarded (it forwards what occurs from then on).
  await node.createPet('Old');
  await node.createPet('Older');

  const dir = mkdtempSync(join(tmpdir(), 'petstore-listen-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const listen = new CliProcess(
    [
      'listen',
      '--forward-to',
      receiver.url('/webhooks'),
      '--api-url',
      `${node.url}/v1`,
      '--types',
      'pet.created',
      '--types',
      'order.placed',
    ],
    { PETSTORE_API_KEY: TEST_KEY },
    { cwd: dir },
  );
  t.after(() => listen.kill());
  const printed = await listen.waitFor(
    'the Ready line',
    () => /signed with (whsec_\S+)/.exec(listen.stdout)?.[1],
  );
  const secret = readFileSync(join(dir, LISTEN_SECRET_FILE), 'utf8').trim();
  assert.equal(printed, secret, 'the secret printed is the one kept in the folder');

  const rex = await node.createPet('Rex');
  const order = JSON.parse((await node.call('POST', '/v1/store/orders', { petId: rex })).text) as {
    id: number;
  };
  await node.call('POST', `/v1/store/orders/${order.id}/cancel`); // order.cancelled: not asked for
  await node.createPet('Tom');
  await receiver.waitFor(3);

  // The node restarts: the stream breaks, and listen opens it again with Last-Event-ID.
  await node.close();
  await node.createPet('While down').catch(() => undefined); // refused: nothing listens
  node = await startNode(database, port);
  await node.createPet('Bella');
  await node.createPet('Redirect');
  await node.createPet('Max');
  await receiver.waitFor(6);

  const events = (await node.storage.events.list({ afterId: 0n, types: [], limit: 100 })).filter(
    (e) => e.type === 'pet.created' || e.type === 'order.placed',
  );
  const expected = events.slice(2).map((e) => Number(e.id)); // Old and Older came before listen
  await receiver.waitFor(expected.length);
  const got = receiver.received.map((r) => verified(secret, r).id);
  assert.deepEqual(got, expected, 'every event once, in order');
  for (const request of receiver.received) {
    assert.equal(request.headers['webhook-id'], String(verified(secret, request).id));
    assert.equal(request.headers['content-type'], 'application/json');
    assert.match(String(request.headers['user-agent']), /^animal-store-webhooks\//);
    const one = await node.call('GET', `/v1/events/${request.headers['webhook-id']}`);
    assert.equal(request.body, one.text, 'the body of a real delivery');
  }
  assert.equal(elsewhere.received.length, 0, 'the redirect was not followed');
  assert.match(
    listen.stderr,
    /reconnecting in 2 s, after event \d+/,
    'the stream broke and was opened again',
  );

  await listen.waitFor('a line per event', () =>
    listen.stdout.split('\n').filter((line) => / -> /.test(line)).length === expected.length
      ? true
      : undefined,
  );
  const lines = listen.stdout.split('\n').filter((line) => / -> /.test(line));
  for (const [i, line] of lines.entries())
    assert.match(
      line,
      new RegExp(`^\\d{4}-\\d\\d-\\d\\dT\\S+Z +(pet\\.created|order\\.placed) +${expected[i]} +-> `),
    );
  assert.equal(lines.filter((line) => line.endsWith('-> 302 (a redirect: not followed)')).length, 1);
  assert.equal(lines.filter((line) => line.endsWith('-> 204')).length, expected.length - 1);

  listen.signal('SIGINT');
  const exit = await listen.exitStatus();
  assert.equal(exit.code, 0, listen.output());
});
