import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';

const WATCH = new URL('./stall-watch.js', import.meta.url).href;

/** Runs `source` as npm test runs a group (the watch imported first), with a stall bound of 1 s. */
async function runGroup(t: { after(fn: () => void): void }, source: string) {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-stall-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'group.test.mjs');
  writeFileSync(file, `await import(${JSON.stringify(WATCH)});\n${source}`);
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['--test', '--test-reporter=spec', file], {
      env: { ...env, TEST_STALL_MS: '1000' },
      timeout: 30_000, // a watch that never fires must fail this test, not hang it
    });
    return { code: 0, stdout, killed: false };
  } catch (error) {
    const { code, stdout, killed } = error as { code: number; stdout: string; killed: boolean };
    return { code, stdout, killed };
  }
}

test('when a test of a group never ends (here in its clean-up), then its process fails once no test has started for the bound, naming that test and what holds its event loop', async (t) => {
  const { code, stdout, killed } = await runGroup(
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
  assert.equal(code, 1, stdout);
  assert.match(stdout, /✔ quick/);
  assert.match(
    stdout,
    /stalled: no test has started for \d+ s; the last to start was "stuck in its clean-up"; what holds the event loop: [^\n]*TCPServerWrap/,
  );
  assert.doesNotMatch(stdout, /never reached/);
});

test('when every test of a group ends, then the watch neither fails it nor holds its process open', async (t) => {
  const { code, stdout } = await runGroup(
    t,
    `import { describe, test } from 'node:test';
describe('a suite', () => { test('one', () => {}); test('two', async () => {}); });
`,
  );
  assert.equal(code, 0, stdout);
  assert.match(stdout, /ℹ pass 2\n/);
  assert.doesNotMatch(stdout, /stalled/);
});
