import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { runNodeTest } from './node-test-run.js';

const WATCH = new URL('./stall-watch.js', import.meta.url).href;

/** Runs `source` as npm test runs a group (the watch imported first), with a stall bound of 1 s. */
async function runGroup(t: { after(fn: () => void): void }, source: string) {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-stall-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'group.test.mjs');
  writeFileSync(file, `await import(${JSON.stringify(WATCH)});\n${source}`);
  // A watch that never fires must fail this test, not hang it.
  return runNodeTest([file], { env: { TEST_STALL_MS: '1000' }, timeoutMs: 30_000 });
}

test('when a test of a group never ends (here in its clean-up), then its process fails once no test has started for the bound, naming that test and what holds its event loop', async (t) => {
  const { code, output, killed } = await runGroup(
    t,
    `import { test } from 'node:test';
import { createServer } from 'node:http';
const server = createServer().listen(0, '127.0.0.1');
test('quick', () => {});
test('stuck in its clean-up', (t) => { t.after(() => new Promise(() => {})); });
test('never reached', () => server.close());
`,
  );
  assert.equal(killed, false, 'it ended by itself, not at the 30 s bound');
  assert.equal(code, 1, output);
  assert.match(output, /✔ quick/);
  assert.match(
    output,
    /stalled: no test has started for \d+ s; the last to start was "stuck in its clean-up"; what holds the event loop: [^\n]*TCPServerWrap/,
  );
  assert.doesNotMatch(output, /never reached/);
});

test('when every test of a group ends, then the watch neither fails it nor holds its process open', async (t) => {
  const { code, output } = await runGroup(
    t,
    `import { describe, test } from 'node:test';
describe('a suite', () => { test('one', () => {}); test('two', async () => {}); });
`,
  );
  assert.equal(code, 0, output);
  assert.match(output, /ℹ pass 2\n/);
  assert.doesNotMatch(output, /stalled/);
});
