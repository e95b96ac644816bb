import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

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
