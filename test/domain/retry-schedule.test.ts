import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nextAttemptAt, parseDurationMs, parseRetrySchedule } from '../../src/domain/retry-schedule.js';

const AT = new Date('2026-11-26T00:00:00.000Z');

test('when a schedule is parsed, then each delay is in milliseconds, and a text that is not a duration is refused naming it', () => {
  assert.deepEqual(parseRetrySchedule('250ms,5s,5m,2h,1d'), [250, 5_000, 300_000, 7_200_000, 86_400_000]);
  for (const bad of ['5', 's', '5w', '-5s', '1.5s', ''])
    assert.throws(() => parseDurationMs(bad), new RegExp(`"${bad}" is not a duration`));
});

test('when an attempt fails, then the next is after its delay ±20% (the jitter at both ends), and none after the last delay', () => {
  const schedule = [10_000, 60_000];
  assert.equal(nextAttemptAt(schedule, 1, AT, () => 0)?.getTime(), AT.getTime() + 8_000);
  assert.equal(nextAttemptAt(schedule, 1, AT, () => 0.5)?.getTime(), AT.getTime() + 10_000);
  assert.equal(nextAttemptAt(schedule, 1, AT, () => 0.999_999)?.getTime(), AT.getTime() + 12_000);
  assert.equal(nextAttemptAt(schedule, 2, AT, () => 0.5)?.getTime(), AT.getTime() + 60_000);
  assert.equal(
    nextAttemptAt(schedule, 3, AT, () => 0.5),
    undefined,
    'three attempts made: the schedule is spent',
  );
  for (let i = 0; i < 200; i++) {
    const delay = (nextAttemptAt(schedule, 1, AT) as Date).getTime() - AT.getTime();
    assert.ok(delay >= 8_000 && delay <= 12_000, String(delay));
  }
});
