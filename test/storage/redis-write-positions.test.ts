import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Redis } from 'ioredis';
import { type RedisFailureSource, RedisHealth } from '../../src/redis.js';
import { RedisWritePositions, UNKNOWN_POSITION } from '../../src/storage/postgres/write-positions.js';

/** A stand-in for the connection: every command fails while `down`, and answers otherwise. */
function standIn() {
  const state = { down: true };
  const fail = () => Promise.reject(new Error('Connection is closed.'));
  const redis = {
    defineCommand(name: string) {
      (redis as Record<string, unknown>)[name] = async () => (state.down ? fail() : 1);
    },
    get: async () => (state.down ? fail() : null),
  };
  return { state, redis: redis as unknown as Redis };
}

function reporting() {
  const lines: { level: 'warn' | 'info'; message: string }[] = [];
  const counts = new Map<RedisFailureSource, number>();
  return {
    lines,
    counts,
    log: {
      warn: (_object: object, message: string) => lines.push({ level: 'warn', message }),
      info: (message: string) => lines.push({ level: 'info', message }),
    },
    errors: {
      inc: ({ source }: { source: RedisFailureSource }, value = 1) =>
        counts.set(source, (counts.get(source) ?? 0) + value),
    },
  };
}

test('when Redis fails the write positions, then every failed command is counted, the outage is logged once, and its end once', async () => {
  const { state, redis } = standIn();
  const health = new RedisHealth();
  const positions = new RedisWritePositions(redis, 'petstore:wal:test:', 30_000, health);
  // Before the app reports (the storage opens first): counted and logged once it does.
  await positions.record('a', 10n);
  const told = reporting();
  health.report(told);
  assert.equal(told.counts.get('write_positions'), 1);
  await positions.record('a', 20n);
  assert.equal(
    await positions.get('b'),
    UNKNOWN_POSITION,
    'a lookup that fails sends the read to the primary',
  );
  assert.equal(await positions.get('a'), UNKNOWN_POSITION);
  assert.equal(told.counts.get('write_positions'), 4);
  assert.deepEqual(
    told.lines.map((line) => line.level),
    ['warn'],
    'one line for the outage, not one per command',
  );
  state.down = false;
  assert.equal(await positions.get('a'), 20n, "this node's own write still holds");
  await positions.record('a', 30n);
  assert.deepEqual(
    told.lines.map((line) => line.level),
    ['warn', 'info'],
  );
  state.down = true;
  await positions.record('a', 40n);
  assert.deepEqual(
    told.lines.map((line) => line.level),
    ['warn', 'info', 'warn'],
    'a new outage is logged again',
  );
  assert.equal(told.counts.get('write_positions'), 5);
  assert.equal(told.counts.get('connection'), undefined);
});
