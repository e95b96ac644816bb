import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { promisify } from 'node:util';
import type { Command } from 'commander';
import ignore from 'ignore';
import { petstoreProgram } from '../../src/cli/program.js';
import { describeConfig } from '../../src/config/config.js';
import { firstKeyMessage } from '../../src/server.js';
import { killAllCliProcesses, startServe, tempDatabase } from '../support/cli.js';

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

/** The repository's ignore rules (its one .gitignore, at the root). */
const GIT_IGNORED = ignore().add(readFileSync(new URL('.gitignore', REPO_ROOT), 'utf8'));

test('when the ignore rules are read, then they hide what git hides and nothing under docs/', () => {
  for (const path of [
    'node_modules/x',
    'dist/cli/main.js',
    'data/petstore.db',
    'x.db-wal',
    '.env',
    'bench/results/a.json',
  ])
    assert.equal(GIT_IGNORED.ignores(path), true, path);
  for (const path of ['docs/soak.md', 'src/app.ts', '.env.example', 'README.md'])
    assert.equal(GIT_IGNORED.ignores(path), false, path);
});

test('when the README links a file under docs/, then it exists and no ignore rule hides it from git', () => {
  const linked = [...README.matchAll(/\]\((docs\/[^)#]+)\)/g)].map((match) => match[1] as string);
  assert.ok(linked.includes('docs/soak.md'), 'the soak report is linked');
  for (const path of new Set(linked)) {
    assert.ok(existsSync(new URL(path, REPO_ROOT)), `${path} exists`);
    // .gitignore's rules read by the `ignore` package (git's own matching), not by git: the tests
    // also run from an export of the repository, with no .git to ask.
    assert.equal(GIT_IGNORED.ignores(path), false, `${path} is matched by an ignore rule`);
  }
});

/** The commands of a README shell block, each with the lines the README says it prints. */
interface Step {
  command: string;
  expected: string[];
}

/**
 * A shell block as steps: a command (continued over lines ending in `\\`) and the comment lines right
 * after it, which quote what it prints. A comment after a blank line introduces the next command.
 */
function steps(block: string): Step[] {
  const result: Step[] = [];
  let open: Step | undefined;
  let continued = false;
  for (const line of block.split('\n')) {
    if (continued && open) {
      open.command += `\n${line}`;
      continued = line.endsWith('\\');
    } else if (line.startsWith('# ') && open) {
      open.expected.push(line.slice(2));
    } else if (line === '' || line.startsWith('#')) {
      open = undefined;
    } else {
      open = { command: line, expected: [] };
      result.push(open);
      continued = line.endsWith('\\');
    }
  }
  return result;
}

/** The instants in an output, which no README can quote. */
const withoutInstants = (text: string) =>
  text.replaceAll(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/g, '<instant>');

after(() => killAllCliProcesses());

test('when the Try it and Store walkthroughs are run verbatim against a fresh start, then every command prints what the README says', async (t) => {
  const database = tempDatabase();
  t.after(() => database.remove());
  // A fresh start: no key anywhere, so the service creates one and prints it, as a new user sees it.
  const server = await startServe({ DATABASE_URL: database.url });
  t.after(() => server.kill());
  const key = await server.waitFor(
    'the first key',
    () => /^ {2}(pst_[A-Za-z0-9_-]{43})$/m.exec(server.stderr)?.[1],
  );

  const tryIt = README.slice(README.indexOf('## Try it'), README.indexOf('## Docs page'));
  const blocks = [...tryIt.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1] as string);
  assert.equal(blocks.length, 2, 'the Try it block and the Store walkthrough');
  const all = blocks.flatMap(steps).filter((step) => !step.command.startsWith('KEY='));
  assert.ok(all.length >= 25, `only ${all.length} commands`);
  const silent = all.filter((step) => step.expected.length === 0).map((step) => step.command);
  assert.deepEqual(silent, [], 'every command says what it prints');
  // A refusal shows its status line: curl exits 0 whatever the status, so the body alone could hide it.
  for (const { command, expected } of all)
    if (expected.some((line) => line.startsWith('{"code"')))
      assert.match(expected[0] as string, /^HTTP\/1\.1 [45]\d\d /, `${command}: its status line`);

  const run = promisify(execFile);
  for (const { command, expected } of all) {
    // Verbatim but for the address: this service listens on a port of its own, not 3000.
    const { stdout } = await run('bash', ['-c', command.replaceAll('http://127.0.0.1:3000', server.url)], {
      env: { ...process.env, KEY: key },
      maxBuffer: 16 * 1024 * 1024,
    });
    const lines = withoutInstants(stdout).split(/\r?\n/);
    let at = 0;
    for (const line of expected.map(withoutInstants)) {
      // `…` stands for what differs from run to run (a cursor).
      const pattern = new RegExp(
        `^${line
          .split('…')
          .map((part) => part.replaceAll(/[.*+?^${}()|[\]\\]/g, '\\$&'))
          .join('.*')}$`,
      );
      const found = lines.findIndex((printed, index) => index >= at && pattern.test(printed));
      assert.ok(found >= 0, `${command}\nprinted:\n${stdout}\nnot, in this order: ${line}`);
      at = found + 1;
    }
  }
});
