import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import { GET_PET_DEPRECATED_AT, GET_PET_SUNSET } from '../../src/domain/deprecation.js';

const ROOT = new URL('../../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, ROOT), 'utf8');
const packageJson = JSON.parse(read('package.json'));

test('when someone looks for the licence, then package.json, LICENSE and the README all say Apache-2.0', () => {
  assert.equal(packageJson.license, 'Apache-2.0');
  assert.equal(packageJson.private, undefined, 'the package is not private');
  const licence = read('LICENSE');
  assert.match(licence, /^\s*Apache License\s+Version 2\.0, January 2004\s/);
  assert.match(licence, /Grant of Patent License/);
  assert.match(read('README.md'), /Apache License 2\.0 \(\[LICENSE\]\(LICENSE\)\)/);
  const internal = JSON.parse(read('packages/better-sqlite3-node20/package.json'));
  assert.equal(internal.license, 'Apache-2.0');
});

describe('npm prepare (scripts/prepare.js)', () => {
  /** A package folder holding the script, whose build writes built.txt; with TypeScript and a build, or not. */
  function folder(t: TestContext, { typescript, built }: { typescript: boolean; built: boolean }): string {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-prepare-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    mkdirSync(join(dir, 'scripts'));
    copyFileSync(new URL('scripts/prepare.js', ROOT), join(dir, 'scripts/prepare.js'));
    const scripts = { build: `node -e "require('fs').writeFileSync('built.txt', 'yes')"` };
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'p', type: 'module', scripts }));
    if (typescript) {
      mkdirSync(join(dir, 'node_modules/typescript'), { recursive: true });
      writeFileSync(
        join(dir, 'node_modules/typescript/package.json'),
        '{"name":"typescript","main":"tsc.js"}',
      );
      writeFileSync(join(dir, 'node_modules/typescript/tsc.js'), '');
    }
    if (built) {
      mkdirSync(join(dir, 'dist/cli'), { recursive: true });
      writeFileSync(join(dir, 'dist/cli/main.js'), '');
    }
    return dir;
  }
  const prepare = (dir: string) =>
    spawnSync(process.execPath, ['scripts/prepare.js'], { cwd: dir, encoding: 'utf8' });

  test('when TypeScript is installed (npm install, npm ci), then it builds', (t) => {
    const dir = folder(t, { typescript: true, built: false });
    const result = prepare(dir);
    assert.equal(result.status, 0, result.stderr);
    assert.equal(readFileSync(join(dir, 'built.txt'), 'utf8'), 'yes');
  });

  test('when TypeScript is absent on a built tree (npm ci --omit=dev), then it succeeds quietly and builds nothing', (t) => {
    const dir = folder(t, { typescript: false, built: true });
    const result = prepare(dir);
    assert.equal(result.status, 0);
    assert.equal(`${result.stdout}${result.stderr}`, '');
    assert.equal(existsSync(join(dir, 'built.txt')), false);
  });

  test('when TypeScript is absent and nothing was built, then the install still succeeds and one line says to build first', (t) => {
    const dir = folder(t, { typescript: false, built: false });
    const result = prepare(dir);
    assert.equal(result.status, 0);
    assert.equal(result.stdout, '');
    assert.match(
      result.stderr,
      /^petstore: .*dist\/ holds no build: build first \(npm ci && npm run build\), then npm ci --omit=dev\n$/,
    );
  });
});

describe('the version', () => {
  const changelog = read('CHANGELOG.md');

  test('when the package has a version, then CHANGELOG.md has its section, dated, under Unreleased, in the Keep a Changelog form', () => {
    const headings = [...changelog.matchAll(/^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$/gm)];
    assert.equal(headings[0]?.[1], 'Unreleased');
    const current = headings.find((heading) => heading[1] === packageJson.version);
    assert.ok(current, `CHANGELOG.md has a section for ${packageJson.version}`);
    assert.match(current[2] ?? '', /^\d{4}-\d{2}-\d{2}$/, 'the release is dated');
    for (const [, version] of headings.slice(1)) assert.match(version as string, /^\d+\.\d+\.\d+$/);
  });

  test('when the changelog states the versioning policy, then getPet keeps it: its sunset is at least 12 months after its deprecation, on the dates stated', () => {
    assert.match(changelog, /^## Versioning policy$/m);
    assert.match(changelog, /Semantic Versioning/);
    assert.match(changelog, /The API under `\/v1` only ever changes additively/);
    const monthsLater = new Date(GET_PET_DEPRECATED_AT);
    monthsLater.setUTCMonth(monthsLater.getUTCMonth() + 12);
    assert.ok(GET_PET_SUNSET >= monthsLater, 'the sunset is at least 12 months after the deprecation');
    const day = (date: Date) => date.toISOString().slice(0, 10);
    assert.match(
      changelog,
      new RegExp(`deprecated on ${day(GET_PET_DEPRECATED_AT)}, sunset on ${day(GET_PET_SUNSET)}`),
    );
  });
});
