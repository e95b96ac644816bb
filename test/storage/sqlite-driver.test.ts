/**
 * Which better-sqlite3 the SQLite adapter loads (src/storage/sqlite/driver.ts), from an arrangement of
 * packages laid out as npm installs them: the root's 13, and packages/better-sqlite3-node20 (the real
 * index.cjs) linked from node_modules, with or without its own 12. Stand-ins export their name, so
 * nothing native is loaded.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import { loadBetterSqlite3 } from '../../src/storage/sqlite/driver.js';
import { REPO_ROOT } from '../../support/service-process.js';

const NODE20_INDEX = join(REPO_ROOT, 'packages/better-sqlite3-node20/index.cjs');

/** A package that exports the string `name version` when loaded. */
function standIn(dir: string, name: string, version: string, main = 'index.js'): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, version, main }));
  if (main === 'index.js') writeFileSync(join(dir, main), `module.exports = '${name} ${version}';\n`);
}

interface Install {
  require: NodeJS.Require;
  /** The root's better-sqlite3 13 entry point, which must not be loaded on Node.js 20. */
  root13: string;
}

/** An install: the root's 13, and the optional package as npm links it (unless `node20` is 'absent'). */
function install(t: TestContext, node20: 'with its 12' | 'without its node_modules' | 'absent'): Install {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-driver-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  standIn(join(dir, 'node_modules/better-sqlite3'), 'better-sqlite3', '13.2.0');
  if (node20 !== 'absent') {
    const pkg = join(dir, 'packages/better-sqlite3-node20');
    standIn(pkg, 'better-sqlite3-node20', '1.0.0', 'index.cjs');
    copyFileSync(NODE20_INDEX, join(pkg, 'index.cjs'));
    symlinkSync('../packages/better-sqlite3-node20', join(dir, 'node_modules/better-sqlite3-node20'));
    if (node20 === 'with its 12')
      standIn(join(pkg, 'node_modules/better-sqlite3'), 'better-sqlite3', '12.11.1');
  }
  return {
    require: createRequire(join(dir, 'index.js')),
    root13: join(dir, 'node_modules/better-sqlite3/index.js'),
  };
}

describe('the better-sqlite3 line loaded', () => {
  test('when Node-API 10 is there (Node.js 22.14 and later), then it loads the root’s 13', (t) => {
    const { require } = install(t, 'with its 12');
    assert.equal(loadBetterSqlite3(10, require), 'better-sqlite3 13.2.0');
  });

  test('when Node-API 10 is not (Node.js 20) and the optional package has its 12, then it loads that 12', (t) => {
    const { require, root13 } = install(t, 'with its 12');
    assert.equal(loadBetterSqlite3(9, require), 'better-sqlite3 12.11.1');
    assert.equal(require.cache[root13], undefined, 'the root’s 13 was not loaded');
  });

  test('when Node-API 10 is not and the optional package lacks its node_modules, then it refuses, saying what to run, and never loads the root’s 13 (which would crash the process)', (t) => {
    const { require, root13 } = install(t, 'without its node_modules');
    assert.throws(() => loadBetterSqlite3(9, require), {
      message:
        /^better-sqlite3 12 for Node\.js 20 is not installed \(packages\/better-sqlite3-node20 finds 13\.2\.0, which needs Node-API 10\): run `npm install` \(or `npm ci`\), without --omit=optional,/,
    });
    assert.equal(require.cache[root13], undefined, 'the root’s 13 was not loaded');
  });

  test('when Node-API 10 is not and the optional package is not installed at all, then it refuses, saying what to run', (t) => {
    const { require } = install(t, 'absent');
    assert.throws(() => loadBetterSqlite3(9, require), {
      message:
        /^better-sqlite3 12 for Node\.js 20 is not installed \(packages\/better-sqlite3-node20 has none\): run `npm install` \(or `npm ci`\)/,
    });
  });
});
