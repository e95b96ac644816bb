import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../support/cli.js';
import { startTestServer, TEST_KEY } from '../support/test-server.js';

const run = promisify(execFile);

test('when the soak meets the service rate limit, then it counts the 429s as throttled, not as errors, and warns', async (t) => {
  const server = await startTestServer({ env: { RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '5' } });
  t.after(() => server.close());
  const { stdout } = await run(
    process.execPath,
    ['--import', 'tsx', 'scripts/soak.ts', '--url', server.url, '--key', TEST_KEY, '--duration', '2s'],
    { cwd: REPO_ROOT, timeout: 120_000 },
  );
  const count = (pattern: RegExp) => Number(pattern.exec(stdout)?.[1]);
  const requests = count(/\*\*(\d+) requests\*\*/);
  const throttled = count(/\*\*(\d+) throttled\*\* \(429\)/);
  // The bucket lets 5 through at once and 1 a second: nearly every request of the run is refused.
  assert.ok(throttled > 0 && throttled < requests, stdout);
  assert.equal(count(/^\| 429 \| (\d+) \|$/m), throttled, 'the status table agrees');
  assert.equal(count(/\*\*(\d+) errors\*\* \(5xx or network\)/), 0);
  assert.match(
    stdout,
    new RegExp(`\\*\\*Warning: ${throttled} of ${requests} requests \\([\\d.]+%\\) were throttled`),
  );
  assert.match(stdout, /RATE_LIMIT_PER_SECOND=0/);
  // A 429 is the limiter doing its job: not listed among the unexpected answers.
  assert.match(stdout, /### Unexpected answers \(first 10\)\n\nNone\./);
});
