import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { describeConfig } from '../../src/config/config.js';
import { VERSION } from '../../src/version.js';
import { killAllCliProcesses, runCli, runInProcess } from '../support/cli.js';
import { PACKAGE_VERSION } from '../support/cli-commands.js';

/** `petstore --version` and the help of the program and its commands. */

after(() => killAllCliProcesses());

/** Lines of a section of commander's help, e.g. "Commands:", up to the next blank line. */
function helpSection(help: string, title: string): string[] {
  const start = help.split('\n').indexOf(title);
  assert.ok(start >= 0, `no "${title}" section in:\n${help}`);
  const lines = help.split('\n').slice(start + 1);
  const end = lines.indexOf('');
  return end < 0 ? lines : lines.slice(0, end);
}

describe('petstore help', { concurrency: 4 }, () => {
  test('when run with --version, then it prints the version of package.json and exits 0', async () => {
    // The executable itself, once: the other commands' parsing and output run in this process.
    const result = await runCli(['--version']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, `${PACKAGE_VERSION}\n`);
    assert.equal(VERSION, PACKAGE_VERSION);
  });

  test('when run with --help, then it lists serve, keys and migrate, each with a one-line purpose, and exits 0', async () => {
    const result = await runInProcess(['--help']);
    assert.equal(result.code, 0, result.stderr);
    const commands = helpSection(result.stdout, 'Commands:');
    for (const name of ['serve', 'keys', 'migrate']) {
      const line = commands.find((l) => l.trimStart().startsWith(`${name} `));
      assert.ok(line, `${name} is not listed:\n${result.stdout}`);
      assert.match(line, new RegExp(`^\\s+${name}(\\s+\\[options\\])?\\s{2,}\\S.{9,}$`));
    }
    // One line each: every line of the section starts a command, none continues a wrapped purpose.
    for (const line of commands) {
      assert.match(
        line,
        /^ {2}\S+( \S+)*\s{2,}\S/,
        `a purpose spans more than one line:\n${commands.join('\n')}`,
      );
    }
  });

  test('when run with keys --help, then it lists create, list and revoke and exits 0', async () => {
    const result = await runInProcess(['keys', '--help']);
    assert.equal(result.code, 0, result.stderr);
    const commands = helpSection(result.stdout, 'Commands:');
    for (const name of ['create', 'list', 'revoke']) {
      assert.ok(
        commands.some((line) => new RegExp(`^\\s+${name}\\b.*\\s{2,}\\S`).test(line)),
        `${name} is not listed with a purpose:\n${result.stdout}`,
      );
    }
  });

  test('when serve is given a --role that is not api, deliver or all, then it exits non-zero naming the three, and --help describes each', async () => {
    const wrong = await runInProcess(['serve', '--role', 'worker']);
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, /--role <role>.*'worker' is invalid.*all, api, deliver/s);
    const help = await runInProcess(['serve', '--help']);
    // Commander wraps the description: compared with its lines joined.
    const options = help.stdout.replace(/\n\s+/g, ' ');
    assert.match(
      options,
      /--role <role> +what the process does: "api" serves the API and delivers no webhook; "deliver" delivers webhooks and answers only \/healthz, \/readyz and \/metrics; "all" does both \(choices: "all", "api", "deliver", default: "all"\)/,
    );
  });

  test('when run with serve --help, then it lists every environment variable with its meaning and exits 0', async () => {
    const result = await runInProcess(['serve', '--help']);
    assert.equal(result.code, 0, result.stderr);
    const variables = helpSection(result.stdout, 'Environment variables:');
    for (const { name } of describeConfig()) {
      assert.ok(
        variables.some((line) => new RegExp(`^\\s+${name}\\s+\\S`).test(line)),
        `${name} is not listed:\n${result.stdout}`,
      );
    }
    // Every description starts in one column, the longest name included.
    const columns = new Set(
      describeConfig().map(({ name }) => {
        const line = variables.find((l) => new RegExp(`^\\s+${name}\\s`).test(l)) as string;
        return (
          line.indexOf(name) +
          name.length +
          (/^\s*/.exec(line.slice(line.indexOf(name) + name.length))?.[0].length ?? 0)
        );
      }),
    );
    assert.equal(columns.size, 1, `descriptions start in ${columns.size} columns:\n${variables.join('\n')}`);
    assert.match(result.stdout, /PORT\s+.*\(default: 3000\)/);
    assert.match(result.stdout, /DATABASE_URL\s+.*\(default: "sqlite:\.\/data\/petstore\.db"\)/);
  });
});
