import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, normalize } from 'node:path';
import { after, type TestContext, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Command } from 'commander';
import ignore from 'ignore';
import { petstoreProgram } from '../../src/cli/program.js';
import { describeConfig } from '../../src/config/config.js';
import { API_KEY_SCOPES } from '../../src/domain/api-keys.js';
import { firstKeyMessage } from '../../src/server.js';
import { killAllCliProcesses, poll, startServe, tempDatabase } from '../support/cli.js';
import { documents, READ_ME, REPO_ROOT_URL as REPO_ROOT, readDoc } from '../support/docs.js';
import { freePort } from '../support/free-port.js';
import { startTestServer, TEST_KEY } from '../support/test-server.js';

/** The front page, and the reference pages whose text these tests hold to the code. */
const README = readDoc(READ_ME);
const CONFIGURATION = readDoc('docs/configuration.md');
const DEVELOPMENT = readDoc('docs/development.md');
const API = readDoc('docs/api.md');
/** The tour: every operation with curl, and what each prints (the README keeps a short one). */
const TOUR = readDoc('docs/tour.md');

test('when the configuration grows, then the configuration table (docs/configuration.md) names every variable', () => {
  for (const variable of describeConfig()) {
    assert.match(
      CONFIGURATION,
      new RegExp(`^\\| \`${variable.name}\` +\\|`, 'm'),
      `${variable.name} is missing from docs/configuration.md`,
    );
  }
});

test('when a scope or an operation is added, then the scope table (docs/api.md) has a row per scope, naming each operation that needs it, and says how many scopes a key gets', () => {
  // openapi.json is the document the service serves (CI's client:check keeps it so): each operation's scope.
  const document = JSON.parse(readDoc('openapi.json')) as {
    paths: Record<string, Record<string, { operationId?: string; security?: { bearerAuth?: string[] }[] }>>;
  };
  const needs = new Map<string, string[]>();
  for (const operations of Object.values(document.paths))
    for (const { operationId, security } of Object.values(operations)) {
      const scope = security?.[0]?.bearerAuth?.[0];
      if (operationId && scope) needs.set(scope, [...(needs.get(scope) ?? []), operationId]);
    }
  const table = new Map<string, string[]>();
  for (const [, operations, scope] of API.matchAll(/^ {2}\| (.+) \| `([a-z]+:[a-z]+)` \|$/gm))
    table.set(
      scope as string,
      [...(operations as string).matchAll(/`([a-zA-Z]+)` `/g)].map((m) => m[1] as string),
    );
  assert.deepEqual([...table.keys()], [...API_KEY_SCOPES], 'one row per scope, in their order');
  for (const scope of API_KEY_SCOPES)
    assert.deepEqual(table.get(scope)?.sort(), needs.get(scope)?.sort(), `the operations of ${scope}`);
  const count = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine'][
    API_KEY_SCOPES.length - 1
  ];
  const scopes = /^- \*\*Scopes\.\*\*[\s\S]*?\n\n/m.exec(API)?.[0] ?? '';
  // Keys from keys create, and from PETSTORE_API_KEYS: each said to have them all, by number.
  assert.deepEqual(scopes.match(/\ball \w+\b/g), [`all ${count}`, `all ${count}`], scopes);
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

test("when someone reads how keys and webhooks work, then docs/api.md says the service is one store, one tenant: scopes, not ownership, and endpoints and their limit are the store's", () => {
  assert.match(API, /\*\*One store, one tenant\.\*\* The service is one store's\./);
  assert.match(API, /any key with\s+`webhooks:write` lists, changes and deletes every webhook endpoint/);
  assert.match(API, /`WEBHOOK_MAX_ENDPOINTS` are the store's, shared by all its keys/);
  assert.match(
    API,
    /Endpoints are the store's, not a key's: every key with the\s+scope sees and manages all of them/,
  );
});

test('when the command line grows, then the command table (docs/configuration.md) has one row per command, with its options', () => {
  const rows = new Map<string, string>();
  for (const match of CONFIGURATION.matchAll(/^\| `petstore ([^`]+)` +\|/gm)) {
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
      `the row of ${path} names its options`,
    );
  }
});

test('when the command line grows, then the project layout (docs/development.md) names every command under cli/', () => {
  const line = layoutRows()
    .get('src/cli/')
    ?.match(/^the petstore executable: (.+)$/)?.[1];
  assert.ok(line, 'the layout has a cli/ line');
  assert.deepEqual(
    line.split(', '),
    petstoreProgram()
      .commands.map((command) => command.name())
      .filter((name) => name !== 'help'),
  );
});

/** The project layout's table (docs/development.md): each folder's path, as `src/cli/`, and its purpose. */
function layoutRows(): Map<string, string> {
  const section = /^## Project layout\n([\s\S]*?)^## /m.exec(DEVELOPMENT)?.[1] ?? '';
  return new Map(
    [...section.matchAll(/^\| `([^`]+\/)` +\| (.+?) +\|$/gm)].map((m) => [m[1] as string, m[2] as string]),
  );
}

/** The folders under `folder` (a path from the root ending in `/`), every level down when `deep`. */
function foldersUnder(folder: string, deep: boolean): string[] {
  return readdirSync(new URL(folder, REPO_ROOT), { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && entry.name !== '.git')
    .map((entry) => `${folder}${entry.name}/`)
    .filter((path) => !GIT_IGNORED.ignores(path))
    .flatMap((path) => (deep ? [path, ...foldersUnder(path, true)] : [path]));
}

test('when a folder is added or removed, then the project layout (docs/development.md) has a row for each folder of src/ and of the root, and names none that does not exist', () => {
  const rows = layoutRows();
  assert.ok(rows.size > 10, `only ${rows.size} rows in the layout`);
  for (const folder of ['src/', ...foldersUnder('src/', true), ...foldersUnder('', false)])
    assert.ok(rows.has(folder), `docs/development.md's project layout has no row for ${folder}`);
  for (const [folder, purpose] of rows) {
    assert.ok(
      existsSync(new URL(folder, REPO_ROOT)),
      `the project layout names ${folder}, which does not exist`,
    );
    assert.ok(purpose.length > 10, `${folder}: say what it is for`);
  }
});

test('when the README quotes the first start, then it is exactly what the service prints', () => {
  const block = /On its first start[\s\S]*?```\n([\s\S]*?)\n```/.exec(README)?.[1];
  assert.ok(block, 'the README shows the first-start message');
  const key = /pst_[A-Za-z0-9_-]{43}/.exec(block)?.[0] as string;
  assert.equal(block, firstKeyMessage(key, 'http://127.0.0.1:3000'));
});

test('when the configuration table says npm run dev logs for people, then the dev script sets LOG_FORMAT=pretty', () => {
  assert.match(CONFIGURATION, /`npm run dev` uses it/);
  const scripts = JSON.parse(readDoc('package.json')).scripts;
  assert.match(scripts.dev, /^LOG_FORMAT=pretty /);
});

/** The repository's ignore rules (its one .gitignore, at the root). */
const GIT_IGNORED = ignore().add(readDoc('.gitignore'));

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

/** A document's text without its code: fenced blocks and inline code spans (they quote, they do not link). */
const withoutCode = (text: string) => text.replaceAll(/^```[\s\S]*?^```$/gm, '').replaceAll(/`[^`\n]*`/g, '');

/** GitHub's anchor for a heading: lower case, punctuation and formatting dropped, spaces as hyphens. */
const anchor = (heading: string) =>
  heading
    .replaceAll(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replaceAll(/[^\p{L}\p{N}\s_-]/gu, '')
    .replaceAll(/\s/g, '-');

/** The anchors a Markdown document's headings give (a repeated heading gets -1, -2, … as on GitHub). */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const [, heading] of text.replaceAll(/^```[\s\S]*?^```$/gm, '').matchAll(/^#{1,6} (.+)$/gm)) {
    const base = anchor(heading as string);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

test('when the README, the changelog and docs/ link anything, then it is a file of this repository that exists, is not ignored, and has the heading linked to', () => {
  const docs = documents();
  let checked = 0;
  for (const [path, text] of docs) {
    const targets = [
      ...withoutCode(text).matchAll(/\]\(([^)\s]*)(?:\s+"[^"]*")?\)/g),
      ...withoutCode(text).matchAll(/^\[[^\]]+\]:\s*(\S+)/gm),
    ].map((match) => match[1] as string);
    for (const target of targets) {
      checked++;
      const where = `${path} links ${target}`;
      assert.doesNotMatch(target, /^[a-z][a-z0-9+.-]*:|^\/\//i, `${where}: a link outside the repository`);
      assert.ok(!target.startsWith('/'), `${where}: an absolute path`);
      const [file, fragment] = target.split('#') as [string, string | undefined];
      const resolved = file === '' ? path : normalize(join(dirname(path), decodeURI(file)));
      assert.ok(!resolved.startsWith('..'), `${where}: outside the repository`);
      assert.ok(existsSync(new URL(resolved, REPO_ROOT)), `${where}: ${resolved} does not exist`);
      // .gitignore's rules read by the `ignore` package (git's own matching), not by git: the tests
      // also run from an export of the repository, with no .git to ask.
      assert.equal(
        GIT_IGNORED.ignores(resolved),
        false,
        `${where}: ${resolved} is matched by an ignore rule`,
      );
      if (fragment !== undefined) {
        assert.match(resolved, /\.md$/, `${where}: an anchor in a file that is not Markdown`);
        const linked = docs.get(resolved) ?? readDoc(resolved);
        assert.ok(anchors(linked).has(fragment), `${where}: ${resolved} has no heading #${fragment}`);
      }
    }
  }
  assert.ok(checked > 20, `only ${checked} links found`);
});

test('when a newcomer opens the README, then it is a front page: short, with a contents list of its sections, linking every document under docs/ and the changelog', () => {
  const lines = README.split('\n').length;
  assert.ok(lines <= 210, `the README has ${lines} lines`);
  const contents = /^\*\*Contents\*\*\n\n((?:(?:- | {2}).*\n)+)/m.exec(README)?.[1];
  assert.ok(contents, 'the README has a contents list');
  const listed = [...contents.matchAll(/\]\(#([^)]+)\)/g)].map((match) => match[1]);
  for (const [, heading] of withoutCode(README).matchAll(/^## (.+)$/gm)) {
    assert.ok(listed.includes(anchor(heading as string)), `the contents list has no entry for "${heading}"`);
  }
  const linked = new Set([...withoutCode(README).matchAll(/\]\(([^)#\s]+)/g)].map((match) => match[1]));
  for (const path of [...documents().keys()].filter((path) => path !== READ_ME)) {
    assert.ok(linked.has(path), `the README does not link ${path}`);
  }
});

test('when the docs name their sources, then nothing outside the repository is cited', () => {
  for (const [path, text] of documents()) {
    assert.doesNotMatch(
      text,
      /shared\/|DECISIONS\.md|seed\/000_/,
      `${path} cites a file outside the repository`,
    );
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

/** `stdout` holds the README's quoted lines, in this order; `…` stands for what differs from run to run. */
function assertPrinted(command: string, stdout: string, expected: string[]): void {
  const lines = withoutInstants(stdout).split(/\r?\n/);
  let at = 0;
  for (const line of expected.map(withoutInstants)) {
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

/**
 * Runs the commands of `blocks` verbatim against a fresh start (no key anywhere, so the service creates
 * one and prints it, as a new user sees it), each printing what its comment lines say. At least
 * `minimum` commands; every command says what it prints, and a refusal shows its status line.
 */
async function runVerbatim(t: TestContext, blocks: string[], minimum: number): Promise<void> {
  const database = tempDatabase();
  t.after(() => database.remove());
  const server = await startServe({ DATABASE_URL: database.url });
  t.after(() => server.kill());
  const key = await server.waitFor(
    'the first key',
    () => /^ {2}(pst_[A-Za-z0-9_-]{43})$/m.exec(server.stderr)?.[1],
  );

  const all = blocks.flatMap(steps).filter((step) => !step.command.startsWith('KEY='));
  assert.ok(all.length >= minimum, `only ${all.length} commands`);
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
    assertPrinted(command, stdout, expected);
  }
}

/** The ```sh blocks of a Markdown text. */
const shellBlocks = (text: string) =>
  [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1] as string);

test('when the Try it and Store walkthroughs are run verbatim against a fresh start, then every command prints what the README says', async (t) => {
  // The walkthroughs moved from the README to docs/tour.md, which the README links.
  assert.match(README, /\]\(docs\/tour\.md\)/);
  const blocks = shellBlocks(TOUR);
  assert.equal(blocks.length, 2, 'the Try it block and the Store walkthrough');
  await runVerbatim(t, blocks, 25);
});

test("when the README's short Try it is run verbatim against a fresh start, then every command prints what it says", async (t) => {
  const start = README.indexOf('\n## Try it\n');
  const blocks = shellBlocks(README.slice(start, README.indexOf('\n## ', start + 1)));
  assert.equal(blocks.length, 1, 'one block');
  await runVerbatim(t, blocks, 4);
});

test('when the README webhook walkthrough is followed on a fresh start, then its receiver, written from the README, prints a verified pet.created for the pet of Try it', async (t) => {
  const section = README.slice(
    README.indexOf('\n## Events and webhooks\n'),
    README.indexOf('\n## Production install\n'),
  );
  const shell = /```sh\n([\s\S]*?)```/.exec(section)?.[1] as string;
  const receiverSource = /```js\n([\s\S]*?)```/.exec(section)?.[1] as string;
  const [start, register, receiver, ...rest] = steps(shell);
  assert.equal(start?.command, 'WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8 npm start');
  assert.match(receiver?.command ?? '', /^WEBHOOK_SECRET=whsec_\.\.\. node receiver\.mjs$/);
  assert.ok(
    rest.length >= 1 && [register, receiver, ...rest].every((step) => (step?.expected.length ?? 0) > 0),
  );

  // The service as `npm start` runs it (serve), on a fresh database, with the README's setting.
  const database = tempDatabase();
  t.after(() => database.remove());
  const server = await startServe({ DATABASE_URL: database.url, WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' });
  t.after(() => server.kill());
  const key = await server.waitFor(
    'the first key',
    () => /^ {2}(pst_[A-Za-z0-9_-]{43})$/m.exec(server.stderr)?.[1],
  );
  // The receiver's port: the README's 4000, unless it is taken here.
  const port = String(await freePort());
  const local = (text: string) =>
    text.replaceAll('http://127.0.0.1:3000', server.url).replaceAll('4000', port);
  const run = promisify(execFile);
  const sh = async (command: string) =>
    (await run('bash', ['-c', local(command)], { env: { ...process.env, KEY: key } })).stdout;

  const registered = await sh(register?.command as string);
  assertPrinted(register?.command as string, registered, (register?.expected ?? []).map(local));
  const secret = /"secret":"(whsec_[^"]+)"/.exec(registered)?.[1] as string;
  assert.ok(secret);

  // The receiver exactly as the README writes it, where `standardwebhooks` resolves (this install's).
  const dir = mkdtempSync(join(tmpdir(), 'petstore-receiver-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  symlinkSync(fileURLToPath(new URL('node_modules', REPO_ROOT)), join(dir, 'node_modules'));
  writeFileSync(join(dir, 'receiver.mjs'), local(receiverSource));
  const child = spawn(process.execPath, ['receiver.mjs'], {
    cwd: dir,
    env: { ...process.env, WEBHOOK_SECRET: secret },
  });
  t.after(() => child.kill());
  let printed = '';
  child.stdout.on('data', (chunk: Buffer) => {
    printed += chunk.toString();
  });
  await poll('the receiver to listen', () =>
    fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}' }).then(
      (res) => (res.status === 400 ? true : undefined),
      () => undefined,
    ),
  );

  // Try it's first command adds Rex; the receiver prints what the README says.
  const tryIt = README.slice(README.indexOf('\n## Try it\n'));
  const addRex = steps(/```sh\n([\s\S]*?)```/.exec(tryIt)?.[1] as string).find((step) =>
    step.command.startsWith('curl'),
  );
  await sh(addRex?.command as string);
  await poll('the receiver to print the event', () => (printed.includes('\n') ? true : undefined));
  assertPrinted(receiver?.command as string, printed, receiver?.expected ?? []);
  for (const step of rest) assertPrinted(step.command, await sh(step.command), step.expected.map(local));
});

test('when the README section on petstore listen is followed, then listen prints its Ready line and a line for the pet of Try it, and the README receiver, started with the kept secret, verifies it', async (t) => {
  const section = README.slice(
    README.indexOf('\n### Webhooks on your laptop'),
    README.indexOf('\n## The client\n'),
  );
  const [listen, receiver, ...rest] = steps(/```sh\n([\s\S]*?)```/.exec(section)?.[1] as string);
  assert.match(
    listen?.command ?? '',
    /^PETSTORE_API_KEY=\$KEY npx petstore listen --api-url \S+ --forward-to /,
  );
  assert.match(
    receiver?.command ?? '',
    /^WEBHOOK_SECRET=\$\(cat \.petstore\/listen-secret\) node receiver\.mjs$/,
  );
  assert.deepEqual(rest, []);
  const webhooks = README.slice(README.indexOf('\n## Events and webhooks\n'));
  const receiverSource = /```js\n([\s\S]*?)```/.exec(webhooks)?.[1] as string;

  // A fresh database: Try it's first command adds Rex, event 1.
  const server = await startTestServer();
  t.after(() => server.close());
  const port = String(await freePort());
  const local = (text: string) =>
    text.replaceAll('http://127.0.0.1:3000', server.url).replaceAll('4000', port);
  // A folder of the user's own, where `npx petstore` finds this build and `standardwebhooks` resolves.
  const dir = mkdtempSync(join(tmpdir(), 'petstore-listen-readme-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'node_modules', '.bin'), { recursive: true });
  const bin = join(dir, 'node_modules', '.bin', 'petstore');
  writeFileSync(
    bin,
    `#!/bin/sh\nexec "${process.execPath}" "${fileURLToPath(new URL('dist/cli/main.js', REPO_ROOT))}" "$@"\n`,
  );
  chmodSync(bin, 0o755);
  symlinkSync(
    fileURLToPath(new URL('node_modules/standardwebhooks', REPO_ROOT)),
    join(dir, 'node_modules', 'standardwebhooks'),
  );
  writeFileSync(join(dir, 'receiver.mjs'), local(receiverSource));
  const started = (command: string) => {
    const child = spawn('bash', ['-c', local(command)], {
      cwd: dir,
      env: { ...process.env, KEY: TEST_KEY },
      detached: true, // its own process group: npx's child goes with it
    });
    t.after(() => {
      try {
        process.kill(-(child.pid as number), 'SIGKILL');
      } catch {
        // already gone
      }
    });
    const output = { text: '' };
    child.stdout.on('data', (chunk: Buffer) => {
      output.text += chunk.toString();
    });
    return output;
  };

  const listening = started(listen?.command as string);
  await poll('the Ready line', () => (listening.text.includes('Ready') ? true : undefined));
  const printed = started(receiver?.command as string);
  await poll('the receiver to listen', () =>
    fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}' }).then(
      (res) => (res.status === 400 ? true : undefined),
      () => undefined,
    ),
  );
  const tryIt = README.slice(README.indexOf('\n## Try it\n'));
  const addRex = steps(/```sh\n([\s\S]*?)```/.exec(tryIt)?.[1] as string).find((step) =>
    step.command.startsWith('curl'),
  );
  const run = promisify(execFile);
  await run('bash', ['-c', local(addRex?.command as string)], { env: { ...process.env, KEY: TEST_KEY } });
  await poll('the receiver to print the event', () => (printed.text.includes('\n') ? true : undefined));
  await poll('listen to print the event', () => (/ -> /.test(listening.text) ? true : undefined));
  assertPrinted(listen?.command as string, listening.text, (listen?.expected ?? []).map(local));
  assertPrinted(receiver?.command as string, printed.text, receiver?.expected ?? []);
});
