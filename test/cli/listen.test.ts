import assert from 'node:assert/strict';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
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

test("when the secret's folder or file may be read or written by others, or the file is a link, then listen refuses it, says how to mend it, and writes nothing through the link", () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-listen-'));
  const known = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
  try {
    const folder = join(dir, '.petstore');
    const file = join(dir, LISTEN_SECRET_FILE);
    mkdirSync(folder);
    chmodSync(folder, 0o777);
    writeFileSync(file, `${known}\n`, { mode: 0o600 });
    assert.throws(
      () => listenSecret(dir),
      /\.petstore may be read or written by others \(mode 777\).*run chmod 700/,
    );
    chmodSync(folder, 0o700);
    chmodSync(file, 0o644);
    assert.throws(
      () => listenSecret(dir),
      /listen-secret may be read or written by others \(mode 644\).*run chmod 600/,
    );
    rmSync(file);
    const target = join(dir, 'precious');
    writeFileSync(target, 'mine\n');
    symlinkSync(target, file);
    assert.throws(() => listenSecret(dir), /listen-secret is a symbolic link: remove it/);
    assert.equal(readFileSync(target, 'utf8'), 'mine\n', 'nothing written through the link');
    rmSync(file);
    symlinkSync(join(dir, 'nowhere'), file); // a dangling link: following it would create the file
    assert.throws(() => listenSecret(dir), /is a symbolic link/);
    rmSync(file);
    const made = listenSecret(dir);
    assert.notEqual(made, known);
    assert.equal(statSync(file).mode & 0o777, 0o600);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('when listen starts, then it asks for the stream from now (one request, no search of the feed); a retry: 0 is taken as 0.5 s, and data that never ends a message breaks the stream instead of filling memory', async (t) => {
  const asked: { url: string; headers: IncomingHttpHeaders }[] = [];
  const service = createServer((req, res) => {
    asked.push({ url: req.url ?? '', headers: req.headers });
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (asked.length > 1) return; // the second stream stays open, quiet
    res.write('retry: 0\n\nid: 5\n\n');
    // 4 MiB of data lines with no blank line between: a message that never ends.
    const line = `data: ${'x'.repeat(1_000)}\n`;
    const write = (left: number) => {
      while (left > 0) {
        left--;
        if (!res.write(line)) return res.once('drain', () => write(left));
      }
      res.end();
    };
    write(4_000);
  });
  await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    service.closeAllConnections();
    service.close();
  });
  const address = service.address() as { port: number };
  const dir = mkdtempSync(join(tmpdir(), 'petstore-listen-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const listen = new CliProcess(
    [
      'listen',
      '--forward-to',
      'http://127.0.0.1:9/hooks',
      '--api-url',
      `http://127.0.0.1:${address.port}/v1`,
    ],
    { PETSTORE_API_KEY: TEST_KEY },
    { cwd: dir },
  );
  t.after(() => listen.kill());
  await listen.waitFor('the second stream', () => (asked.length >= 2 ? true : undefined));
  assert.match(listen.stdout, /^Ready: forwarding events to http:\/\/127\.0\.0\.1:9\/hooks/m);
  assert.equal(asked[0]?.url, '/v1/events?after=now');
  assert.equal(asked[0]?.headers['last-event-id'], undefined);
  assert.match(
    listen.stderr,
    /the stream broke \(a message's data of the event stream is longer than 1048576 characters: not read further\); reconnecting in 0\.5 s, after event 5/,
  );
  assert.equal(asked[1]?.url, '/v1/events?after=5');
  assert.equal(asked[1]?.headers['last-event-id'], '5');
  listen.signal('SIGINT');
  assert.equal((await listen.exitStatus()).code, 0, listen.output());
  assert.equal(asked.length, 2);
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
