import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import type { DeliveryQueue } from '../../src/domain/webhooks.js';
import { openStorage } from '../../src/storage/open-storage.js';
import { Deliverer } from '../../src/webhooks/deliverer.js';
import { WebhookSender } from '../../src/webhooks/sender.js';
import { createPet } from '../support/storage.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * An attempt's slot is free once its answer is in, while its outcome waits to be written: a database
 * slow to write outcomes (its writer busy, a commit waiting) does not stop deliveries. Outcomes are
 * held here until the test lets them through (a gate in front of the real SQLite store); the deliveries
 * owed go on arriving meanwhile. Counting the answered attempts in the process's bound of 64 stalled
 * them at 64 until the outcomes were written (about 4,400 a second on one endpoint, whatever its pace).
 */
/** More than the 64 attempts at once, fewer than one endpoint may have leased ahead. */
const OWED = 100;
const MAX_IN_FLIGHT = 64;

test('when the outcomes of answered attempts wait to be written, then more deliveries than the bound on attempts at once are made meanwhile', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-in-flight-'));
  const config = loadConfig({
    DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`,
    WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
  });
  const storage = await openStorage(config);
  const receiver = await WebhookReceiver.start();
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  // The real store, with writing outcomes held back until the gate opens.
  const store: DeliveryQueue = Object.assign(Object.create(storage.deliveries) as DeliveryQueue, {
    recordAttempt: async (...args: Parameters<DeliveryQueue['recordAttempt']>) => {
      await gate;
      return storage.deliveries.recordAttempt(...args);
    },
  });
  const deliverer = new Deliverer({
    store,
    sender: new WebhookSender(config.webhooks.policy, { timeoutMs: 10_000, connectionsPerEndpoint: 4 }),
    schedule: [1_000],
    timeoutMs: 10_000,
    disableAfterMs: 86_400_000,
    concurrencyPerEndpoint: 4,
    now: () => new Date(),
    log: { info: () => undefined, warn: () => undefined },
  });
  try {
    const endpoint = await storage.webhookEndpoints.createEndpoint(
      {
        url: receiver.url('/hook'),
        types: ['*'],
        description: '',
        secret: `whsec_${Buffer.alloc(24, 1).toString('base64')}`,
        createdAt: new Date(),
      },
      100,
    );
    assert.ok(endpoint);
    for (let i = 0; i < OWED; i++)
      await createPet(storage, { name: `pet ${i}`, categoryId: 1n, status: 'available' });
    deliverer.start();
    // Every delivery owed arrives while no outcome has been written.
    const received = await receiver.waitFor(OWED, '/hook');
    assert.equal(new Set(received.map((r) => r.headers['webhook-id'])).size, OWED);
    assert.ok(OWED > MAX_IN_FLIGHT);
  } finally {
    open();
    await deliverer.stop(5_000);
    await receiver.close();
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
