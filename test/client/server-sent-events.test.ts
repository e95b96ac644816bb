import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  MAX_MESSAGE_CHARS,
  MAX_RETRY_MS,
  MIN_RETRY_MS,
  type ServerSentEvent,
  ServerSentEventParser,
} from '../../packages/client/src/server-sent-events.js';
import { propertyRuns } from '../support/property-runs.js';

/** Everything the parser dispatches for `chunks`, and the retry values it saw. */
function parse(chunks: (string | Uint8Array)[]): { events: ServerSentEvent[]; retries: number[] } {
  const events: ServerSentEvent[] = [];
  const retries: number[] = [];
  const parser = new ServerSentEventParser({ event: (e) => events.push(e), retry: (ms) => retries.push(ms) });
  for (const chunk of chunks) parser.push(chunk);
  return { events, retries };
}

const message = (data: string, lastEventId = '', type = 'message'): ServerSentEvent => ({
  type,
  data,
  lastEventId,
});

// The HTML standard's own examples (§9.2.6, "Interpreting an event stream", and §9.2.5).
test('when the HTML standard example of a stock ticker arrives, then its three data lines are one message joined by LF', () => {
  assert.deepEqual(parse(['data: YHOO\ndata: +2\ndata: 10\n\n']).events, [message('YHOO\n+2\n10')]);
});

test('when the HTML standard example with a comment and ids arrives, then ids carry over, a bare id resets it, and only one space after the colon is dropped', () => {
  const stream =
    ': test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n';
  assert.deepEqual(parse([stream]).events, [
    message('first event', '1'),
    message('second event', ''),
    message(' third event', ''),
  ]);
});

test('when the HTML standard example of empty data fields arrives, then an empty and a newline message are dispatched, and the unfinished last one is not', () => {
  assert.deepEqual(parse(['data\n\ndata\ndata\n\ndata:']).events, [message(''), message('\n')]);
});

test('when the HTML standard example of "data:test" and "data: test" arrives, then both are the same message', () => {
  assert.deepEqual(parse(['data:test\n\ndata: test\n\n']).events, [message('test'), message('test')]);
});

test('when fields are event, retry, id with NULL and unknown ones, then the type is kept for one message, retry only as digits, a NULL id ignored, unknown fields ignored', () => {
  const { events, retries } = parse([
    'retry: 2000\n\nevent: pet.created\nid: 7\nfoo: bar\ndata: {}\n\nid: 8\0\nretry: 1s\ndata: x\n\n',
  ]);
  assert.deepEqual(retries, [2000]);
  assert.deepEqual(events, [message('{}', '7', 'pet.created'), message('x', '7')]);
});

test('when lines end with CR, LF or CRLF, a CRLF split across chunks included, and the stream starts with a BOM, then the messages are the same', () => {
  const expected = [message('a', '1', 'e'), message('b', '2')];
  const bytes = new TextEncoder().encode('\ufeffevent: e\rid: 1\r\ndata: a\r\n\r\nid: 2\ndata: b\r\r');
  assert.deepEqual(parse([bytes]).events, expected);
  const cut = bytes.indexOf(10); // the LF of the first CRLF: the CR ends one chunk
  assert.deepEqual(parse([bytes.subarray(0, cut), bytes.subarray(cut)]).events, expected);
});

test('when a stream is cut into chunks anywhere, even inside a UTF-8 character, then the messages are what the whole stream gives', () => {
  const stream = new TextEncoder().encode(
    'retry: 2000\n\nid: 1\nevent: pet.created\ndata: {"name":"Réx ☃ 🐕"}\n\n: keep-alive\n\nid: 2\r\nevent: order.placed\r\ndata: {}\r\n\r\n',
  );
  const whole = parse([stream]);
  assert.equal(whole.events.length, 2);
  fc.assert(
    fc.property(fc.uniqueArray(fc.integer({ min: 1, max: stream.length - 1 }), { maxLength: 12 }), (cuts) => {
      const at = [0, ...cuts.sort((a, b) => a - b), stream.length];
      const chunks = at.slice(1).map((end, i) => stream.subarray(at[i], end));
      assert.deepEqual(parse(chunks), whole);
    }),
    { numRuns: propertyRuns(200) },
  );
});

test('when a service sends a line that never ends, or data lines with no blank line, then the reader throws once past MAX_MESSAGE_CHARS instead of holding more; a message just under it is read', () => {
  const line = new ServerSentEventParser({ event: () => undefined });
  const chunk = 'x'.repeat(64 * 1024);
  let held = 0;
  assert.throws(() => {
    for (;;) {
      line.push(chunk);
      held += chunk.length;
      if (held > 2 * MAX_MESSAGE_CHARS) break;
    }
  }, /a line of the event stream is longer than 1048576 characters/);
  assert.ok(held <= MAX_MESSAGE_CHARS, `held ${held} characters before throwing`);

  const data = new ServerSentEventParser({ event: () => undefined });
  const dataLine = `data: ${'y'.repeat(1_000)}\n`;
  let sent = 0;
  assert.throws(() => {
    for (; sent < 4 * MAX_MESSAGE_CHARS; sent += dataLine.length) data.push(dataLine);
  }, /a message's data of the event stream is longer than/);
  // Each line's `data: ` prefix and its LF are not data: 1,007 characters sent for 1,001 held.
  assert.ok(sent <= MAX_MESSAGE_CHARS * 1.01, `read ${sent} characters before throwing`);

  const big = 'z'.repeat(MAX_MESSAGE_CHARS - 10);
  assert.equal(parse([`data: ${big}\n\n`]).events[0]?.data, big);
});

test('when a service sends retry: 0 or a very large retry, then the reader takes it within its bounds', () => {
  assert.deepEqual(parse(['retry: 0\n\nretry: 999999999\n\nretry: 1500\n\n']).retries, [
    MIN_RETRY_MS,
    MAX_RETRY_MS,
    1500,
  ]);
});

test('when a stream starts with an id alone (after=now), then nothing is dispatched and the reader knows that id', () => {
  const parser = new ServerSentEventParser({
    event: () => {
      throw new Error('nothing to dispatch');
    },
  });
  parser.push('retry: 2000\n\nid: 42\n\n');
  assert.equal(parser.lastEventId, '42');
});
