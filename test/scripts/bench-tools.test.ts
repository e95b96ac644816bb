import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { RUN_SCENARIOS, TOOLS } from '../../bench/tools.js';
import { READ_ME, REPO_ROOT_URL, readDoc } from '../support/docs.js';

const README = readDoc('bench/README.md');

/** bench/README.md's tools table: each tool's name, its file, and the rest of its row. */
function toolRows(): Map<string, { file: string; row: string }> {
  return new Map(
    [...README.matchAll(/^\| `([a-z-]+)` \(`([a-z-]+\.ts)`\) \|(.*)$/gm)].map((m) => [
      m[1] as string,
      { file: m[2] as string, row: m[3] as string },
    ]),
  );
}

test('when a benchmark tool is added or removed, then bench/README.md has one row per tool npm run bench starts, naming its file, how to run it and what it prints', () => {
  const rows = toolRows();
  assert.deepEqual([...rows.keys()].sort(), Object.keys(TOOLS).sort());
  for (const [name, { file, row }] of rows) {
    assert.ok(existsSync(new URL(`bench/${file}`, REPO_ROOT_URL)), `${name}: bench/${file} does not exist`);
    assert.match(
      row,
      new RegExp(`\`npm run bench -- ${name === 'run' ? '' : name}`),
      `${name}: how to run it`,
    );
  }
  const run = rows.get('run')?.row ?? '';
  for (const scenario of RUN_SCENARIOS)
    assert.ok(run.includes(`\`${scenario}\``), `run's row names ${scenario}`);
});

test('when a file is added to bench/, then bench/README.md names it', () => {
  const files = readdirSync(new URL('bench/', REPO_ROOT_URL), { withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name !== READ_ME)
    .map((entry) => entry.name);
  assert.ok(files.length > 10, `only ${files.length} files in bench/`);
  for (const file of files)
    assert.ok(README.includes(`\`${file}\``), `bench/README.md does not name ${file}`);
});

test('when npm run bench is run, then it is the one way in, bench/main.ts, and no other script starts a benchmark', () => {
  const scripts = JSON.parse(readDoc('package.json')).scripts as Record<string, string>;
  assert.equal(scripts.bench, 'tsx bench/main.ts');
  for (const [name, script] of Object.entries(scripts))
    if (name !== 'bench') assert.doesNotMatch(script, /\bbench\//, `npm run ${name} starts a benchmark`);
});

test('when the storage boundary changes, then bench/patches/no-query.patch (how docs/benchmarks.md takes the query away) still applies to the tree', () => {
  const check = spawnSync('git', ['apply', '--check', 'bench/patches/no-query.patch'], {
    cwd: fileURLToPath(REPO_ROOT_URL),
    encoding: 'utf8',
  });
  assert.equal(check.status, 0, check.stderr);
});
