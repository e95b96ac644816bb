import assert from 'node:assert/strict';
import { test } from 'node:test';
import { failuresAfter, restartDelay } from '../../src/cluster.js';

test('when workers die in a row, then the wait before the next fork starts at 250 ms and doubles up to 10 s', () => {
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 8].map(restartDelay),
    [250, 500, 1_000, 2_000, 4_000, 8_000, 10_000, 10_000],
  );
});

test('when a worker dies after serving 10 s, then the count starts over and the next fork is at once', () => {
  assert.equal(failuresAfter(5, 10_000), 0);
  assert.equal(restartDelay(failuresAfter(5, 10_000)), 0);
  assert.equal(failuresAfter(5, 9_999), 6, 'a shorter life is one more death in a row');
  assert.equal(failuresAfter(0, 0), 1, 'a worker that never listened');
});
