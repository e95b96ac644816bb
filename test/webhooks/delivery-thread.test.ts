import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { MessageChannel } from 'node:worker_threads';
import {
  DeliveryThread,
  type FromDeliveryThread,
  type MetricsBatch,
  type ToDeliveryThread,
} from '../../src/webhooks/delivery-thread.js';
import { serveDeliveries } from '../../src/webhooks/serve-deliveries.js';
import { cleanUpInReverse, sqlite } from '../support/backends.js';
import { poll } from '../support/cli.js';
import { createPet } from '../support/storage.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

/** The host side of `--role all`'s delivery thread: a thread that ends is logged and started again. */
test('when the delivery thread ends on its own, then the node logs it and starts it again a second later; a stop ends it for good', async (t) => {
  const folder = mkdtempSync(join(tmpdir(), 'delivery-thread-'));
  t.after(() => rmSync(folder, { recursive: true, force: true }));
  const counter = join(folder, 'starts');
  const logged: string[] = [];
  const log = {
    info: () => undefined,
    warn: () => undefined,
    error: (_object: object, message: string) => logged.push(message),
  };
  const metrics = { attempted: () => undefined, disabled: () => undefined, delivered: () => undefined };
  const thread = new DeliveryThread(
    { variables: { counter } },
    metrics,
    log,
    new URL('./fixtures/ending-thread.mjs', import.meta.url),
  );
  await thread.start();
  await poll('the thread to be started again', () =>
    readFileSync(counter, 'utf8').length === 2 ? true : undefined,
  );
  assert.deepEqual(logged, ['the delivery thread ended: starting it again']);
  await thread.stop(100);
  assert.equal(readFileSync(counter, 'utf8').length, 2, 'started twice, not again after the stop');
  assert.deepEqual(logged, ['the delivery thread ended: starting it again'], 'its end after a stop is not');
});

/** A start or a stop that never settles fails its test, rather than holding the suite up for ever. */
const HANGS_FAIL = { timeout: 20_000 };

/**
 * A thread of fixtures/scripted-thread.mjs, what it was told as its file has it, and what the node was
 * told. Each test stops its thread (a stop waits for an exit, which a thread that ended has had).
 */
function scripted(t: { after(fn: () => unknown): void }, script: string) {
  const folder = mkdtempSync(join(tmpdir(), 'delivery-thread-'));
  t.after(() => rmSync(folder, { recursive: true, force: true }));
  const file = join(folder, 'log');
  const logged: [string, string][] = [];
  const told: string[] = [];
  const thread = new DeliveryThread(
    { variables: { script, log: file } },
    {
      attempted: (outcome, seconds) => told.push(`attempted ${outcome} ${seconds}`),
      disabled: (reason) => told.push(`disabled ${reason}`),
      delivered: (lag) => told.push(`delivered ${lag}`),
    },
    {
      info: () => undefined,
      warn: () => undefined,
      error: (object: { err?: Error; code?: number }, message: string) =>
        logged.push([message, object.err?.message ?? `code ${object.code}`]),
    },
    new URL('./fixtures/scripted-thread.mjs', import.meta.url),
  );
  const lines = () => readFileSync(file, 'utf8').trimEnd().split('\n');
  return { thread, logged, told, lines };
}

test('when the thread fails before it has started, then the start is refused with its error, nothing logged', async (t) => {
  const { thread, logged } = scripted(t, 'refuse');
  await assert.rejects(thread.start(), /^Error: refuse: no database$/);
  assert.deepEqual(logged, []);
});

test('when the thread sends its counts, then each reaches the node’s metrics; a stop tells it the grace and waits for its end', async (t) => {
  const { thread, logged, told, lines } = scripted(t, 'count');
  await thread.start();
  await poll('the counts', () => (told.length === 5 ? true : undefined));
  assert.deepEqual(told, [
    'attempted failed 1.5',
    'attempted retrying 0.25',
    'disabled gone',
    'delivered 2.5',
    'delivered 3',
  ]);
  await thread.stop(250);
  assert.deepEqual(lines(), ['start', 'stop 250', 'stopped']);
  assert.deepEqual(logged, []);
});

test('when the thread fails after it started, then its error is logged', async (t) => {
  const { thread, logged, lines } = scripted(t, 'fail');
  await thread.start();
  await thread.stop(0);
  assert.deepEqual(lines(), ['start', 'stop 0']);
  assert.deepEqual(
    logged,
    [['the delivery thread failed', 'fail: lost']],
    'stopping, it is not started again',
  );
});

test(
  'when the thread cannot start again, then that is logged with its error, and it is tried again, later, until it starts; a stop then ends it',
  HANGS_FAIL,
  async (t) => {
    const { thread, logged, lines } = scripted(t, 'fail-again');
    await thread.start();
    await poll('the third start', () =>
      lines().filter((line) => line === 'start').length === 3 ? true : undefined,
    );
    await thread.stop(0);
    assert.deepEqual(lines(), ['start', 'start', 'start', 'stop 0', 'stopped']);
    assert.deepEqual(logged, [
      ['the delivery thread ended: starting it again', 'code 1'],
      ['the delivery thread could not start again: trying again later', 'fail-again: no database'],
    ]);
  },
);

test(
  'when a stop comes after a start again failed, then it ends at once: the failed thread has ended, and none is started after it',
  HANGS_FAIL,
  async (t) => {
    const { thread, logged, lines } = scripted(t, 'fail-again');
    await thread.start();
    await poll('the second start refused', () => (logged.length === 2 ? true : undefined));
    await thread.stop(0);
    assert.deepEqual(lines(), ['start', 'start']);
  },
);

test(
  'when the thread ends before it has started, with no error, then the start is refused',
  HANGS_FAIL,
  async (t) => {
    const { thread, logged, lines } = scripted(t, 'end-early');
    await assert.rejects(thread.start(), /^Error: the delivery thread ended \(code 3\) before it started$/);
    assert.deepEqual(lines(), ['start']);
    assert.deepEqual(logged, []);
    await thread.stop(0);
  },
);

test('when stopped before it was started, then the stop has nothing to wait for', async (t) => {
  const { thread, logged, lines } = scripted(t, 'count');
  await thread.stop(0);
  assert.throws(lines, /ENOENT/, 'no thread was started');
  assert.deepEqual(logged, []);
});

/** A SQLite database with one endpoint, at a receiver in this process; all closed when the test ends. */
async function deliveringTo(t: TestContext) {
  const later = cleanUpInReverse(t);
  const database = await sqlite.create();
  later(() => database.drop());
  const storage = await database.open();
  later(() => storage.close());
  const receiver = await WebhookReceiver.start();
  later(() => receiver.close());
  const endpoint = await storage.webhookEndpoints.createEndpoint(
    { url: receiver.url(), types: ['*'], description: '', secret: 'whsec_AAAA', createdAt: new Date() },
    10,
  );
  assert.ok(endpoint);
  /** The endpoint's deliveries, newest first, as `eventId status/attempts`. */
  const deliveries = async () =>
    (
      await storage.deliveries.listDeliveries({
        endpointId: endpoint.id,
        beforeEventId: undefined,
        limit: 10,
      })
    ).map((d) => `${d.eventId} ${d.status}/${d.attempts}`);
  return { later, database, storage, receiver, deliveries };
}

test('when the node’s delivery thread runs, then it delivers from the database, its counts reach the node’s metrics, and a stop gives back the lease of an attempt past the grace and ends it', async (t) => {
  const { database, storage, receiver, deliveries } = await deliveringTo(t);
  receiver.answer((_request, n) => (n <= 2 ? { status: 204 } : { hang: true }));
  const told: string[] = [];
  const lags: number[] = [];
  const metrics = {
    attempted: (outcome: string, seconds: number) => told.push(`attempted ${outcome} ${seconds >= 0}`),
    disabled: (reason: string) => told.push(`disabled ${reason}`),
    delivered: (lag: number) => lags.push(lag),
  };
  const logged: string[] = [];
  const log = {
    info: () => undefined,
    warn: () => undefined,
    error: (_object: object, message: string) => logged.push(message),
  };
  const thread = new DeliveryThread(
    {
      variables: { DATABASE_URL: database.url, WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8', LOG_LEVEL: 'silent' },
    },
    metrics,
    log,
    // The thread's own code: compiled, delivery-thread.ts's default; through tsx, by way of a fixture.
    import.meta.url.endsWith('.ts')
      ? new URL('./fixtures/tsx-delivery-thread.mjs', import.meta.url)
      : undefined,
  );
  await thread.start();
  await createPet(storage, { name: 'one', categoryId: 1n, status: 'available' });
  await createPet(storage, { name: 'two', categoryId: 1n, status: 'available' });
  await poll('both counted', () => (lags.length === 2 ? true : undefined));
  assert.deepEqual(told, ['attempted succeeded true', 'attempted succeeded true']);
  assert.ok(lags.every((lag) => lag >= 0));

  await createPet(storage, { name: 'three', categoryId: 1n, status: 'available' });
  await receiver.waitFor(3);
  await thread.stop(10);
  assert.deepEqual(await deliveries(), ['3 pending/0', '2 succeeded/1', '1 succeeded/1']);
  assert.deepEqual(logged, []);
});

test('when the thread’s work runs on a port, then it says it has started, delivers from the database, sends its counts in batches, none empty, heeds only a stop, and on a stop waits out the grace, sends what is left and closes the port', async (t) => {
  const { later, database, storage, receiver, deliveries } = await deliveringTo(t);
  let answerThird: (() => void) | undefined;
  const thirdHeld = new Promise<void>((resolve) => {
    answerThird = resolve;
  });
  receiver.answer(async (_request, n) => {
    if (n === 3) await thirdHeld;
    return { status: n === 3 ? 410 : 204 };
  });
  // The node's side of the channel is port2; the work runs in this process, on port1.
  const { port1, port2 } = new MessageChannel();
  const received: FromDeliveryThread[] = [];
  port2.on('message', (message: FromDeliveryThread) => received.push(message));
  const closed = new Promise<void>((resolve) => port2.once('close', resolve));
  later(() => port2.close());
  const batches = () => received.flatMap((message) => (message.type === 'metrics' ? [message.batch] : []));
  const all = <T>(pick: (batch: MetricsBatch) => T[]): T[] => batches().flatMap(pick);

  await serveDeliveries(port1, {
    variables: { DATABASE_URL: database.url, WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8', LOG_LEVEL: 'silent' },
  });
  await poll('the start told', () => (received.length > 0 ? true : undefined));
  assert.deepEqual(received[0], { type: 'started' });

  await createPet(storage, { name: 'one', categoryId: 1n, status: 'available' });
  await createPet(storage, { name: 'two', categoryId: 1n, status: 'available' });
  await poll('both counted', () => (all((b) => b.delivered).length === 2 ? true : undefined));
  assert.deepEqual(
    all((b) => b.attempted).map(([outcome]) => outcome),
    ['succeeded', 'succeeded'],
  );
  // Two of its flushes (every 250 ms) with nothing counted: nothing sent.
  const sent = received.length;
  await sleep(600);
  assert.equal(received.length, sent, 'no batch sent with nothing counted');
  assert.ok(
    batches().every((b) => b.attempted.length + b.disabled.length + b.delivered.length > 0),
    'every batch counts something',
  );

  // Anything but a stop is ignored: it still delivers.
  port2.postMessage({ type: 'pause' } as unknown as ToDeliveryThread);
  await createPet(storage, { name: 'three', categoryId: 1n, status: 'available' });
  await receiver.waitFor(3);
  const beforeStop = received.length;
  port2.postMessage({ type: 'stop', graceMs: 5_000 } satisfies ToDeliveryThread);
  // The attempt under way is answered within the grace: counted, and sent before the port closes.
  answerThird?.();
  await closed;
  const afterStop = received.slice(beforeStop);
  assert.ok(afterStop.every((message) => message.type === 'metrics'));
  assert.deepEqual(
    all((b) => b.attempted).map(([outcome]) => outcome),
    ['succeeded', 'succeeded', 'failed'],
  );
  assert.deepEqual(
    all((b) => b.disabled),
    ['gone'],
  );
  assert.equal(all((b) => b.delivered).length, 2);
  assert.deepEqual(await deliveries(), ['3 failed/1', '2 succeeded/1', '1 succeeded/1']);
});
