import { beforeEach } from 'node:test';

/**
 * Imported first by every group file `npm test` runs (scripts/build-tests.js): a test process in which
 * no test has started for STALL_MS is stuck, in a test, its clean-ups or a hook. It says which test
 * started last and what still holds its event loop, then exits with a failure, so the run fails in
 * minutes with a name rather than at CI's time limit with none. (Once a group process sat 80 minutes
 * in a test that never ended, and the run said only that the file's promise was still pending.)
 *
 * The slowest test takes about 25 s on a quiet machine: the bound is ten times that and more. Set
 * TEST_STALL_MS to change it (the test of this module does).
 */
const asked = Number(process.env.TEST_STALL_MS);
const STALL_MS = asked > 0 ? asked : 300_000; // unset, not a number or not positive: the default

let last = { name: '(before the first test)', at: Date.now() };

// A beforeEach of the process's root runs before every test of every file it imports, nested or not.
beforeEach((t) => {
  // fullName (with its suites) from Node.js 22.3; Node.js 20 has only the test's own name.
  last = { name: (t as { fullName?: string }).fullName ?? t.name, at: Date.now() };
});

setInterval(
  () => {
    const idle = Date.now() - last.at;
    if (idle < STALL_MS) return;
    process.stderr.write(
      `stalled: no test has started for ${Math.round(idle / 1000)} s; the last to start was "${last.name}"; ` +
        `what holds the event loop: ${process.getActiveResourcesInfo().join(', ')}\n`,
    );
    process.exit(1);
  },
  Math.min(STALL_MS / 4, 10_000),
).unref();
