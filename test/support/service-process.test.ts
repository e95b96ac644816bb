import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { CliProcess, isBuildCurrent, REPO_ROOT } from '../../support/service-process.js';

// docs/development.md, Tests: npm test builds first, and the tests that need the executable start it from dist/
// when that build is current, through tsx from source otherwise.

test('when the build is current, then petstore runs from dist/, and the source entry runs it through tsx', async () => {
  // What pretest does (incremental, so it writes nothing when nothing changed but the build's stamp),
  // unless it has been done since the last change under src/, as npm test's pretest has.
  if (!isBuildCurrent()) execFileSync('npm', ['run', '-s', 'build'], { cwd: REPO_ROOT, stdio: 'ignore' });
  assert.ok(isBuildCurrent(), 'the build is current');

  const built = new CliProcess(['--help'], {});
  const builtResult = await built.exitStatus();
  assert.equal(builtResult.code, 0, built.output());
  assert.deepEqual(built.child.spawnargs.slice(1, 3), [join(REPO_ROOT, 'dist/cli/main.js'), '--help']);
  assert.match(builtResult.stdout, /^Usage: petstore/m);

  const source = new CliProcess(['--help'], {}, { entry: 'source' });
  const sourceResult = await source.exitStatus();
  assert.equal(sourceResult.code, 0, source.output());
  assert.equal(source.child.spawnargs.at(-2), join(REPO_ROOT, 'src/cli/main.ts'));
  assert.ok(source.child.spawnargs.includes('--import'), source.child.spawnargs.join(' '));
  assert.equal(sourceResult.stdout, builtResult.stdout, 'the same program either way');
});
