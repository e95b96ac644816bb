import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runNodeTest } from './node-test-run.js';

/**
 * The totals tell the truth: when PostgreSQL cannot be reached off CI, its half of the suites is
 * reported as skipped, test by test, with the reason; on CI it fails. A suite run in a child test
 * runner, pointed at a port where no PostgreSQL listens.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const UNREACHABLE = 'postgres://postgres@127.0.0.1:1/test';

/** The suite in a test run of its own, from source, with PostgreSQL at a port where none listens. */
const runSuite = (file: string, ci: string) =>
  runNodeTest([file], {
    nodeArgs: ['--import', 'tsx'],
    cwd: ROOT,
    env: { PETSTORE_TEST_POSTGRES_URL: UNREACHABLE, CI: ci },
  });

/** The runner's summary figure, e.g. total(output, 'skipped') for `ℹ skipped 3`. */
const total = (output: string, what: string) =>
  Number(new RegExp(`^ℹ ${what} (\\d+)$`, 'm').exec(output)?.[1]);

describe('PostgreSQL unreachable', { concurrency: 2 }, () => {
  test('when it cannot be reached off CI, then each PostgreSQL test is reported as skipped with the reason, and the run passes', async () => {
    const run = await runSuite('test/http/smoke.test.ts', '');
    assert.equal(run.code, 0, run.output);
    // Each of its tests once per backend: the SQLite half passes, the PostgreSQL half is skipped.
    const tests = total(run.output, 'tests');
    assert.ok(tests >= 2 && tests % 2 === 0, run.output);
    assert.equal(total(run.output, 'pass'), tests / 2, run.output);
    assert.equal(total(run.output, 'skipped'), tests / 2, run.output);
    assert.match(
      run.output,
      /﹣ when a pet is created, then it can be listed and fetched .*# PostgreSQL was not run: cannot reach postgres:\/\/postgres@127\.0\.0\.1:1\/test: /,
    );
  });

  test('when it cannot be reached on CI, then the PostgreSQL tests fail', async () => {
    const run = await runSuite('test/http/smoke.test.ts', 'true');
    assert.equal(run.code, 1, run.output);
    assert.equal(total(run.output, 'pass'), total(run.output, 'tests') / 2, run.output);
    assert.equal(total(run.output, 'skipped'), 0, run.output);
    // A suite whose `before` fails cancels its tests: failed or cancelled, none passes or is skipped.
    assert.ok(total(run.output, 'fail') + total(run.output, 'cancelled') >= 1, run.output);
    assert.match(run.output, /PostgreSQL is required here \(CI=true\) but cannot reach/);
  });
});
