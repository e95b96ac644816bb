import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { ProgressLine } from '../../src/cli/progress-line.js';

function capture(isTTY: boolean): { stream: PassThrough & { isTTY?: boolean }; text: () => string } {
  const stream = Object.assign(new PassThrough(), { isTTY });
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  return { stream, text: () => Buffer.concat(chunks).toString() };
}

test('when the output is a terminal, then progress redraws one line in place and ends it when done', () => {
  const { stream, text } = capture(true);
  const progress = new ProgressLine(stream);
  progress.update('1 of 3');
  progress.update('2 of 3');
  progress.update('3 of 3', true);
  assert.equal(text(), '\r\x1b[2K1 of 3\r\x1b[2K2 of 3\r\x1b[2K3 of 3\n');
});

test('when the output is not a terminal, then progress is plain lines with no control characters, at most one every 2 s, the last always written', () => {
  const { stream, text } = capture(false);
  let clock = 0;
  const progress = new ProgressLine(stream, () => clock);
  progress.update('1 of 5');
  clock += 1_999;
  progress.update('2 of 5'); // within the interval of the first: left out
  clock += 1;
  progress.update('3 of 5'); // 2 s after the first: written
  clock += 1;
  progress.update('4 of 5'); // left out
  progress.update('5 of 5', true); // the last, whatever the interval
  assert.equal(text(), '1 of 5\n3 of 5\n5 of 5\n');
});

test('when the output is not a terminal and the last figures were already written, then ending the line does not repeat them', () => {
  const { stream, text } = capture(false);
  const progress = new ProgressLine(stream, () => 0);
  progress.update('keys: 2 of 2');
  progress.update('keys: 2 of 2', true);
  progress.update('pets: 3 of 3', true);
  assert.equal(text(), 'keys: 2 of 2\npets: 3 of 3\n');
});
