import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import fc from 'fast-check';
import { type ServerSentEvent, ServerSentEventParser } from '../../packages/client/src/server-sent-events.js';
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

test('when the command line and the client each carry the reader, then the two files are the same', () => {
  const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
  assert.equal(read('src/cli/server-sent-events.ts'), read('packages/client/src/server-sent-events.ts'));
});
