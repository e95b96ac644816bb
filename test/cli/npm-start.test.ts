import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { jsonLines, poll, REPO_ROOT, tempDatabase } from '../support/cli.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

// README, Production install: npm start hands SIGTERM on to the service, which drains and exits 0;
// no `node … serve` is left running once npm has exited.
test('when npm start gets SIGTERM, then the service it started gets it too, shuts down and exits, and npm exits 0', async (t) => {
  const database = tempDatabase();
  t.after(() => database.remove());
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  const npm = spawn('npm', ['start'], {
    cwd: REPO_ROOT,
    env: {
      ...env,
      PORT: '0',
      DATABASE_URL: database.url,
      PETSTORE_API_KEYS: 'npm-start-test-key-0123456789',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  npm.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  npm.stderr.resume();
  const exited = new Promise<number | null>((resolve) => npm.on('exit', (code) => resolve(code)));
  t.after(() => npm.kill('SIGKILL'));

  // npm's own lines ("> animal-store@… start") come first; the service's are JSON.
  const logLines = () => jsonLines(stdout.replaceAll(/^[^{].*$/gm, ''));
  const listening = await poll('the service to listen', () =>
    logLines().find((line) => String(line.msg).startsWith('Server listening at')),
  );
  const servicePid = listening.pid as number;
  t.after(() => alive(servicePid) && process.kill(servicePid, 'SIGKILL'));
  assert.notEqual(servicePid, npm.pid, 'the service is a process of its own');
  const url = String(listening.msg).slice('Server listening at '.length);
  assert.equal((await fetch(`${url}/healthz`)).status, 200);
  // The README: after npm start, the console is at /console (built by npm install's build).
  const page = await fetch(`${url}/console`);
  assert.equal(page.status, 200);
  assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'none'/);

  npm.kill('SIGTERM');
  assert.equal(await exited, 0);
  await poll('the service to exit', () => (alive(servicePid) ? undefined : true));
  assert.ok(
    logLines().some((line) => line.msg === 'shutting down' && line.signal === 'SIGTERM'),
    stdout,
  );
  await assert.rejects(fetch(`${url}/healthz`));
});
