import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { killAllCliProcesses, startServe, tempDatabase } from '../support/cli.js';
import { READ_ME, REPO_ROOT_URL, readDoc } from '../support/docs.js';

/**
 * @animal-store/client as another project gets it: the README's lines run as they are, from a stand-in
 * for the checkout (the client package's files, with the repository's node_modules for the build),
 * into an empty project; then the example of docs/client.md run there against a real service.
 */

const run = promisify(execFile);
const ROOT = fileURLToPath(REPO_ROOT_URL);
const KEY = 'client-package-key-0123456789abcdef';

/** The first ```sh (or ```js) block after `heading` in `text`. */
function blockAfter(text: string, heading: string, language: string): string {
  const start = text.indexOf(heading);
  assert.ok(start >= 0, `no "${heading}"`);
  const block = new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``).exec(text.slice(start))?.[1];
  assert.ok(block, `no ${language} block after "${heading}"`);
  return block;
}

/** The environment of a command a user runs: not the test runner's. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, npm_config_fund: 'false', npm_config_audit: 'false' };
  delete env.NODE_TEST_CONTEXT;
  delete env.NODE_OPTIONS;
  return { ...env, ...extra };
}

describe('the client package, installed into an empty project', () => {
  let dir: string;
  let app: string;
  /** What the README's block printed. */
  let printed: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'petstore-client-package-'));
    const checkout = join(dir, 'animal-store');
    mkdirSync(join(checkout, 'packages'), { recursive: true });
    cpSync(join(ROOT, 'packages/client'), join(checkout, 'packages/client'), {
      recursive: true,
      filter: (source) => !/[\\/](dist|node_modules)$/.test(source),
    });
    // TypeScript and the types the build needs, as the checkout has them.
    symlinkSync(join(ROOT, 'node_modules'), join(checkout, 'node_modules'), 'dir');
    const block = blockAfter(readDoc(READ_ME), '\n## The client\n', 'sh');
    const script = block
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'))
      .join('\n');
    const result = await run('bash', ['-e', '-c', script], {
      cwd: checkout,
      env: userEnv(),
      maxBuffer: 16 * 1024 * 1024,
    });
    printed = result.stdout;
    app = join(dir, 'my-app');
  });
  after(() => {
    killAllCliProcesses();
    rmSync(dir, { recursive: true, force: true });
  });

  test('when the README client block is run from the checkout, then the tarball installs into the empty project and the package loads, printing what the README says', () => {
    const block = blockAfter(readDoc(READ_ME), '\n## The client\n', 'sh');
    const expected = block
      .split('\n')
      .filter((line) => line.startsWith('# '))
      .map((line) => line.slice(2));
    assert.deepEqual(expected, [
      'PetstoreClient PetstoreError PetstoreNetworkError WebhookVerificationError fromJson toJson verifyWebhook',
    ]);
    assert.equal(printed.trim().split('\n').at(-1), expected[0]);
  });

  test("when it is installed, then the project holds the client and its four dependencies (with theirs), none of the server's", () => {
    const installed = readdirSync(join(app, 'node_modules')).filter((name) => !name.startsWith('.'));
    assert.deepEqual(installed.sort(), [
      '@animal-store',
      '@stablelib',
      'eventsource-parser',
      'fast-sha256',
      'lossless-json',
      'openapi-fetch',
      'openapi-typescript-helpers',
      'standardwebhooks',
    ]);
    assert.deepEqual(readdirSync(join(app, 'node_modules/@animal-store/client')).sort(), [
      'README.md',
      'dist',
      'package.json',
    ]);
  });

  test('when the example of docs/client.md is run in that project against a real service on a new database, then it prints what the comments say', async (t) => {
    const database = tempDatabase();
    t.after(() => database.remove());
    const server = await startServe({ DATABASE_URL: database.url, PETSTORE_API_KEYS: KEY });
    t.after(() => server.kill());
    const example = blockAfter(readDoc('docs/client.md'), '\n## Using it\n', 'js');
    writeFileSync(join(app, 'example.mjs'), example.replaceAll('http://127.0.0.1:3000', server.url));
    const expected = [...example.matchAll(/\/\/ (.+)$/gm)].map((match) => match[1] as string);
    const { stdout } = await run(process.execPath, ['example.mjs'], {
      cwd: app,
      env: userEnv({ PETSTORE_KEY: KEY }),
    });
    assert.deepEqual(stdout.trim().split('\n'), expected);
    assert.deepEqual(expected, [
      '{"id":1,"name":"Rex","categoryId":9007199254740993,"status":"available"}',
      'Rex sold',
      '1n delivered',
      '404 not_found string',
    ]);
  });
});
