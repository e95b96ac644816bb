import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DeliveryShare } from '../../src/http/delivery-share.js';

/**
 * When new requests are held for deliveries (delivery-share.ts), with the event loop's utilisation
 * given by the test. A window is share × 100 ms: 20 ms here.
 */

function share({ owed = true }: { owed?: boolean } = {}) {
  const utilizations: number[] = [];
  const pauses: number[] = [];
  const gate = new DeliveryShare(0.2, () => owed, {
    utilization: () => utilizations.shift() ?? 0,
    paused: (seconds) => pauses.push(seconds),
  });
  return { gate, utilizations, pauses };
}

/** A response that closes when told: what the gate waits for. */
function response(): ServerResponse & { close(): void } {
  const emitter = new EventEmitter() as EventEmitter & { close(): void };
  emitter.close = () => emitter.emit('close');
  return emitter as unknown as ServerResponse & { close(): void };
}

describe('deliveries’ share of a saturated node', () => {
  test('when the loop is not saturated, or nothing is owed, then no request is ever held', () => {
    const idle = share();
    idle.utilizations.push(0.5, 0.89);
    idle.gate.tick();
    idle.gate.tick();
    assert.equal(idle.gate.admit(), undefined);
    const nothingOwed = share({ owed: false });
    nothingOwed.utilizations.push(1);
    nothingOwed.gate.tick();
    assert.equal(nothingOwed.gate.admit(), undefined);
    assert.deepEqual([...idle.pauses, ...nothingOwed.pauses], []);
  });

  test('when saturated with deliveries owed, then new requests wait until those admitted are answered and then for the window, and all go on together', async () => {
    const { gate, utilizations, pauses } = share();
    const admitted = response();
    gate.started(admitted);
    utilizations.push(0.95);
    gate.tick();
    assert.equal(gate.holding, true);
    const order: string[] = [];
    const waiting = [gate.admit(), gate.admit()];
    assert.ok(waiting.every((w) => w instanceof Promise));
    void Promise.all(waiting).then(() => order.push('admitted'));
    await sleep(5);
    assert.equal(order.length, 0, 'held while the admitted request runs');
    admitted.close(); // answered: the window begins
    order.push('window');
    await Promise.all(waiting);
    assert.deepEqual(order, ['window', 'admitted']);
    assert.equal(gate.holding, false);
    assert.equal(pauses.length, 1);
    assert.ok((pauses[0] as number) >= 0.015, `held for the window (${pauses[0]} s)`);
  });

  test('when an admitted request is never answered (a slow client), then the window opens after the drain’s bound anyway', async () => {
    const { gate, utilizations } = share();
    gate.started(response()); // never closes
    utilizations.push(1);
    gate.tick();
    await gate.admit(); // resolves: 50 ms of drain at most, then the 20 ms window
    assert.equal(gate.holding, false);
  });

  test('when saturation eases, then the gate stays on until the loop is idler than 0.6 (the windows idle it), and off below', () => {
    const { gate, utilizations } = share();
    utilizations.push(0.95);
    gate.tick();
    gate.stop(); // opens
    utilizations.push(0.7);
    gate.tick();
    assert.equal(gate.holding, true, 'still saturated at 0.7');
    gate.stop();
    utilizations.push(0.5);
    gate.tick();
    assert.equal(gate.holding, false, 'no longer at 0.5');
    utilizations.push(0.8);
    gate.tick();
    assert.equal(gate.holding, false, '0.8 does not start it again');
  });

  test('when the node stops, then every held request goes on', async () => {
    const { gate, utilizations } = share();
    gate.started(response());
    utilizations.push(1);
    gate.tick();
    const held = gate.admit();
    gate.stop();
    await held;
    assert.equal(gate.holding, false);
  });
});
