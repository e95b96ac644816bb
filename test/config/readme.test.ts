import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { Command } from 'commander';
import { petstoreProgram } from '../../src/cli/program.js';
import { describeConfig } from '../../src/config/config.js';
import { firstKeyMessage } from '../../src/server.js';

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const REPO_ROOT = new URL('../../', import.meta.url);

test('when the configuration grows, then the README table names every variable', () => {
  for (const variable of describeConfig()) {
    assert.match(
      README,
      new RegExp(`^\\| \`${variable.name}\` +\\|`, 'm'),
      `${variable.name} is missing from the README`,
    );
  }
});

/** Every command a user runs: `serve`, `keys create`, … (a command with subcommands is not run itself). */
function commandPaths(command: Command, prefix = ''): [string, Command][] {
  return command.commands
    .filter((sub) => sub.name() !== 'help')
    .flatMap((sub) => {
      const path = `${prefix}${sub.name()}`;
      return sub.commands.length > 0 ? commandPaths(sub, `${path} `) : [[path, sub] as [string, Command]];
    });
}

test('when the command line grows, then the README command table has one row per command, with its options', () => {
  const rows = new Map<string, string>();
  for (const match of README.matchAll(/^\| `petstore ([^`]+)` +\|/gm)) {
    const usage = match[1] as string;
    rows.set(usage.split(/ (?=[[<-])/)[0] as string, usage);
  }
  const commands = commandPaths(petstoreProgram());
  assert.deepEqual([...rows.keys()].sort(), commands.map(([path]) => path).sort());
  for (const [path, command] of commands) {
    const options = command.options.map((option) => option.long).filter((long) => long !== '--help');
    assert.deepEqual(
      [...(rows.get(path)?.matchAll(/--[a-z-]+/g) ?? [])].map((m) => m[0]).sort(),
      options.sort(),
      `the README row of ${path} names its options`,
    );
  }
});

test('when the command line grows, then the project layout names every command under cli/', () => {
  const line = /^ {2}cli\/ +the petstore executable: (.+)$/m.exec(README)?.[1];
  assert.ok(line, 'the layout has a cli/ line');
  assert.deepEqual(
    line.split(', '),
    petstoreProgram()
      .commands.map((command) => command.name())
      .filter((name) => name !== 'help'),
  );
});

test('when the README quotes the first start, then it is exactly what the service prints', () => {
  const block = /On its first start[\s\S]*?```\n([\s\S]*?)\n```/.exec(README)?.[1];
  assert.ok(block, 'the README shows the first-start message');
  const key = /pst_[A-Za-z0-9_-]{43}/.exec(block)?.[0] as string;
  assert.equal(block, firstKeyMessage(key, 'http://127.0.0.1:3000'));
});

test('when the README says npm run dev logs for people, then the dev script sets LOG_FORMAT=pretty', () => {
  assert.match(README, /`npm run dev` uses it/);
  const scripts = JSON.parse(readFileSync(new URL('package.json', REPO_ROOT), 'utf8')).scripts;
  assert.match(scripts.dev, /^LOG_FORMAT=pretty /);
});

test('when the README links a file under docs/, then it exists and no ignore rule hides it from git', () => {
  const linked = [...README.matchAll(/\]\((docs\/[^)#]+)\)/g)].map((match) => match[1] as string);
  assert.ok(linked.includes('docs/soak.md'), 'the soak report is linked');
  for (const path of new Set(linked)) {
    assert.ok(existsSync(new URL(path, REPO_ROOT)), `${path} exists`);
    // git check-ignore exits 1 when no rule matches the path.
    const ignored = spawnSync('git', ['check-ignore', '--no-index', '-q', path], { cwd: REPO_ROOT });
    assert.equal(ignored.status, 1, `${path} is matched by an ignore rule`);
  }
});
