import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StorageOutage } from '../../src/http/observability/storage-outage.js';
import { captureLog } from '../support/log-capture.js';

function outageWithLog() {
  const { lines, logger } = captureLog('info');
  let now = 0;
  const outage = new StorageOutage(logger, () => now);
  return { lines, outage, advance: (ms: number) => (now += ms) };
}

test('when an outage lasts, then it is logged when it begins, once a minute while it lasts, and when it ends, with the count', () => {
  const { lines, outage, advance } = outageWithLog();
  const down = new Error('connect ECONNREFUSED 127.0.0.1:5432');
  for (let second = 0; second < 150; second++) {
    outage.failed(down);
    outage.failed(down);
    advance(1_000);
  }
  assert.equal(outage.active, true);
  outage.recovered();
  assert.equal(outage.active, false);
  assert.deepEqual(
    lines.map((line) => [line.msg, line.failures ?? null, line.seconds ?? null]),
    [
      ['database unavailable: requests that need it are answered 503 until it is back', null, null],
      ['database still unavailable', 121, 60],
      ['database still unavailable', 241, 120],
      ['database available again', 300, 150],
    ],
  );
  assert.equal(lines[0]?.reason, down.message, 'the reason, not a stack');
  assert.ok(lines.every((line) => line.err === undefined && line.stack === undefined));
});

test('when nothing failed, then a success logs nothing', () => {
  const { lines, outage } = outageWithLog();
  outage.recovered();
  assert.deepEqual(lines, []);
});
