import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { DeliveryThread } from '../../src/webhooks/delivery-thread.js';
import { poll } from '../support/cli.js';

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
});
