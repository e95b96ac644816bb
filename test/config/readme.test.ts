import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { describeConfig } from '../../src/config/config.js';

test('when the configuration grows, then the README table names every variable', () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  for (const variable of describeConfig()) {
    assert.match(
      readme,
      new RegExp(`^\\| \`${variable.name}\` +\\|`, 'm'),
      `${variable.name} is missing from the README`,
    );
  }
});
