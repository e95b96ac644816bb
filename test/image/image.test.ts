/**
 * The container image, tested for real: `npm run test:image` (run by .ci/run; not part of `npm test`).
 * It needs Docker and, as root, gets it: installs docker.io when there is no dockerd, starts
 * `dockerd --iptables=false --bridge=none` when no daemon answers (and stops it at the end), and
 * containers use the host's network. It builds the image from the Dockerfile as it is, on the official
 * Node.js image, or, when that cannot be pulled, on a stand-in built by stand-in-base.sh. Nothing is
 * skipped: what cannot be had fails the run, saying why. Each step reports what it found (build time,
 * image size) as a diagnostic line.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { BlockList, connect, isIP, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, type TestContext, test } from 'node:test';
import { promisify } from 'node:util';
import { VERSION } from '../../src/version.js';
import { createDatabase, type ThrowawayDatabase } from '../../support/postgres-admin.js';
import { poll, REPO_ROOT } from '../../support/service-process.js';
import { POSTGRES_TEST_URL } from '../support/backends.js';
import { freePort } from '../support/free-port.js';

const run = promisify(execFile);
const IMAGE = 'animal-store:image-test';
const DOCKERFILE = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8');
/** The Node.js line the Dockerfile builds on by default, and so the official image it starts from. */
const NODE_LINE = /^ARG NODE_VERSION=(\d+)$/m.exec(DOCKERFILE)?.[1] as string;
const BASE = `node:${NODE_LINE}-bookworm-slim`;
/** The image's layers above its base may weigh this much at most: the runtime dependencies and dist/. */
const MAX_ADDED_MB = 100;
/** `docker stop`'s grace period: past it, Docker kills the process (exit code 137). */
const STOP_GRACE_S = 10;
const KEY = 'image-test-key-0123456789abcdef';

const MB = (bytes: number) => `${(bytes / 1e6).toFixed(0)} MB`;
const seconds = (since: number) => `${((Date.now() - since) / 1000).toFixed(0)} s`;

async function docker(args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  const { stdout } = await run('docker', args, {
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, ...env },
  });
  return stdout.trim();
}

/** stdout and stderr of a container, as `docker logs` gives them (the service logs JSON on stdout). */
async function logs(container: string): Promise<string> {
  const { stdout, stderr } = await run('docker', ['logs', container], { maxBuffer: 64 * 1024 * 1024 });
  return `${stdout}\n${stderr}`;
}

const commandExists = (name: string) => spawnSync('sh', ['-c', `command -v ${name}`]).status === 0;
const daemonAnswers = () => spawnSync('docker', ['info'], { stdio: 'ignore' }).status === 0;

function aptInstall(pkg: string): void {
  if (process.getuid?.() !== 0) throw new Error(`${pkg} is needed, and only root may install it here`);
  for (const args of [
    ['update', '-qq'],
    ['install', '-y', '-qq', pkg],
  ]) {
    const result = spawnSync('apt-get', args, {
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      encoding: 'utf8',
    });
    if (result.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed:\n${result.stderr}`);
  }
}

let dockerd: ChildProcess | undefined;
let scratch: string;
const containers = new Set<string>();
const volumes = new Set<string>();

/** Docker, installed and started if need be (as CI's machine has it: maybe not installed at all). */
async function ensureDocker(t: TestContext): Promise<void> {
  if (!commandExists('docker') || !commandExists('dockerd')) {
    t.diagnostic('docker: dockerd is not installed; installing docker.io (apt-get)');
    aptInstall('docker.io');
  }
  if (daemonAnswers()) {
    t.diagnostic('docker: using the daemon already running');
    return;
  }
  t.diagnostic('docker: no daemon answers; starting dockerd --iptables=false --bridge=none');
  const log = openSync(join(scratch, 'dockerd.log'), 'a');
  dockerd = spawn('dockerd', ['--iptables=false', '--bridge=none'], { stdio: ['ignore', log, log] });
  closeSync(log);
  await poll('dockerd to answer', () => (daemonAnswers() ? true : undefined));
  t.diagnostic(
    `docker: ${await docker(['version', '--format', 'client {{.Client.Version}}, server {{.Server.Version}}'])}`,
  );
}

/** The official base image, pulled; or, where no registry can be reached, the stand-in. */
async function ensureBase(t: TestContext): Promise<void> {
  const started = Date.now();
  try {
    await docker(['pull', '-q', BASE]);
    t.diagnostic(`base: ${BASE} pulled (${seconds(started)})`);
    return;
  } catch (error) {
    const reason = String((error as { stderr?: string }).stderr ?? error)
      .trim()
      .split('\n')[0];
    t.diagnostic(`base: ${BASE} cannot be pulled (${reason})`);
  }
  const description = await docker([
    'image',
    'inspect',
    '--format',
    '{{index .Config.Labels "org.opencontainers.image.description"}}',
    BASE,
  ]).catch(() => undefined);
  // A stand-in made by an older version of the script is made again (its label names the script's hash).
  const script = join(REPO_ROOT, 'test/image/stand-in-base.sh');
  const current = createHash('sha256').update(readFileSync(script)).digest('hex').slice(0, 12);
  if (description !== undefined && (!description.includes('stand-in') || description.endsWith(current))) {
    t.diagnostic(`base: ${BASE} is here already: ${description || 'an earlier pull'}`);
    return;
  }
  const build = spawnSync(script, [BASE, NODE_LINE], {
    encoding: 'utf8',
  });
  assert.equal(build.status, 0, `the stand-in failed:\n${build.stdout}\n${build.stderr}`);
  for (const line of build.stdout.trim().split('\n')) t.diagnostic(line);
  t.diagnostic(`base: the stand-in ${BASE} built in ${seconds(started)}`);
}

/** Starts a container of the image on the host's network, serving on 127.0.0.1:<port>. */
async function startContainer(
  name: string,
  env: Record<string, string>,
  extra: string[] = [],
): Promise<{ name: string; url: string }> {
  const port = await freePort();
  // Load shedding off, as for every service a test starts (support/service-process.ts): a busy shared
  // machine's event-loop lag must not be mistaken for the service's answer (503).
  const settings = { HOST: '127.0.0.1', PORT: String(port), OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0', ...env };
  const envArgs = Object.entries(settings).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
  containers.add(name);
  await docker([
    'run',
    '-d',
    '--name',
    name,
    '--network',
    'host',
    '--read-only',
    ...envArgs,
    ...extra,
    IMAGE,
  ]);
  return { name, url: `http://127.0.0.1:${port}` };
}

/** Waits until a container has said `Server listening` `times` times in all (once per start). */
async function listening(name: string, times = 1): Promise<void> {
  await poll(`${name} to listen`, async () => {
    const text = await logs(name);
    const state = await docker(['inspect', '--format', '{{.State.Status}}', name]);
    if (state === 'exited') throw new Error(`${name} exited:\n${text}`);
    return text.split('Server listening at').length - 1 >= times ? true : undefined;
  });
}

const health = (name: string) => docker(['inspect', '--format', '{{.State.Health.Status}}', name]);

async function createPet(url: string, key: string, name: string): Promise<{ id: number }> {
  const res = await fetch(`${url}/v1/pets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name, categoryId: 1 }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  return (await res.json()) as { id: number };
}

async function listPets(url: string, key: string): Promise<unknown[]> {
  const res = await fetch(`${url}/v1/pets?limit=100`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(res.status, 200);
  return (await res.json()) as unknown[];
}

/** Runs a script with the container's own node, as the container's user; returns what it printed. */
const inContainer = (name: string, script: string) => docker(['exec', name, 'node', '-e', script]);

/** Compose here: `docker compose`, else `docker-compose`, installed (apt-get) when neither is. */
function composeCommand(t: TestContext): string[] {
  if (spawnSync('docker', ['compose', 'version'], { stdio: 'ignore' }).status === 0)
    return ['docker', 'compose'];
  if (!commandExists('docker-compose')) {
    t.diagnostic(
      'compose: neither docker compose nor docker-compose is here; installing docker-compose (apt-get)',
    );
    aptInstall('docker-compose');
  }
  return ['docker-compose'];
}

/** `compose config` of compose.yaml, with `env` and not the developer's own POSTGRES_PASSWORD. */
function composeConfig(compose: string[], env: Record<string, string>) {
  const { POSTGRES_PASSWORD: _own, ...inherited } = process.env;
  return spawnSync(compose[0] as string, [...compose.slice(1), '-f', 'compose.yaml', 'config'], {
    cwd: REPO_ROOT,
    env: { ...inherited, ...env },
    encoding: 'utf8',
  });
}

/** A password for Compose to interpolate, as an operator would set it. */
const POSTGRES_PASSWORD = 'image-test-password-4f9c';

// Read, not run: these need no Docker daemon.
test('when the Dockerfile is read, then it builds on the current LTS line by default (the one .ci/run tests on), a line of engines', () => {
  const lts = /^LTS_LINE=(\d+)$/m.exec(readFileSync(join(REPO_ROOT, '.ci/run'), 'utf8'))?.[1];
  assert.equal(NODE_LINE, lts);
  const engines = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).engines.node as string;
  assert.equal(engines.split(' || ').includes(`^${NODE_LINE}.0.0`), true, engines);
});

test('when compose.yaml is read by Compose, then it needs POSTGRES_PASSWORD, publishes HAProxy’s port alone (metrics on METRICS_PORT, unpublished), and trusts HAProxy’s address alone', (t) => {
  const compose = composeCommand(t);
  const without = composeConfig(compose, {});
  assert.notEqual(without.status, 0, 'config without POSTGRES_PASSWORD must fail');
  assert.match(
    without.stderr,
    /set POSTGRES_PASSWORD \(in the environment or an \.env file beside compose\.yaml\)/,
  );

  const { status, stdout, stderr } = composeConfig(compose, { POSTGRES_PASSWORD });
  assert.equal(status, 0, stderr);
  assert.match(
    stdout,
    new RegExp(`DATABASE_URL: "?postgres://petstore:${POSTGRES_PASSWORD}@postgres:5432/petstore`),
  );
  assert.match(stdout, new RegExp(`POSTGRES_PASSWORD: "?${POSTGRES_PASSWORD}"?$`, 'm'));

  // /metrics on a port of its own, so not on 3000, the one HAProxy sends to; and HAProxy's 8080 is the
  // only port published.
  const metricsPort = /METRICS_PORT: "?(\d+)"?$/m.exec(stdout)?.[1];
  assert.match(metricsPort ?? '', /^\d+$/, 'METRICS_PORT is set');
  assert.notEqual(metricsPort, '3000');
  const cfg = readFileSync(join(REPO_ROOT, 'deploy/haproxy.cfg'), 'utf8');
  assert.match(cfg, /^ {2}server-template petstore \d+ petstore:3000 /m);
  assert.deepEqual(
    [...stdout.matchAll(/published: "?(\d+)"?$/gm)].map((match) => match[1]),
    ['8080'],
  );

  // One address trusted, HAProxy's, fixed outside the range Docker hands the other containers.
  const trusted = /TRUSTED_PROXIES: "?([^"\s]+)"?$/m.exec(stdout)?.[1] ?? '';
  assert.equal(isIP(trusted), 4, `TRUSTED_PROXIES is one address: ${trusted}`);
  assert.equal(/ipv4_address: "?([\d.]+)"?$/m.exec(stdout)?.[1], trusted, 'HAProxy has that address');
  const [subnet, subnetPrefix] = (/subnet: "?([\d.]+\/\d+)"?$/m.exec(stdout)?.[1] ?? '').split('/');
  const [range, rangePrefix] = (/ip_range: "?([\d.]+\/\d+)"?$/m.exec(stdout)?.[1] ?? '').split('/');
  const within = (address: string, network: string | undefined, prefix: string | undefined) => {
    const list = new BlockList();
    list.addSubnet(network as string, Number(prefix));
    return list.check(address);
  };
  assert.equal(within(trusted, subnet, subnetPrefix), true, 'in the network');
  assert.equal(within(trusted, range, rangePrefix), false, 'never handed to another container');
});

test('when deploy/haproxy.cfg is read, then it bounds connections (maxconn overall, per frontend, per replica) and how long a request head may take', () => {
  const cfg = readFileSync(join(REPO_ROOT, 'deploy/haproxy.cfg'), 'utf8');
  const section = (name: string) => new RegExp(`^${name}\\b.*\\n((?: .*\\n|\\n)*)`, 'm').exec(cfg)?.[1] ?? '';
  assert.match(section('global'), /^ {2}maxconn \d+$/m);
  assert.match(section('defaults'), /^ {2}maxconn \d+$/m);
  assert.match(section('defaults'), /^ {2}timeout http-request \d+s$/m);
  assert.match(section('defaults'), /^ {2}timeout queue \d+s$/m);
  assert.match(section('backend petstore'), /^ {2}default-server .* maxconn \d+$/m);
});

after(async () => {
  if (!scratch) return;
  for (const name of containers) await docker(['rm', '-f', '-v', name]).catch(() => undefined);
  for (const volume of volumes) await docker(['volume', 'rm', '-f', volume]).catch(() => undefined);
  if (dockerd) {
    // Ours to stop: it was not running before the test.
    const exited = new Promise((resolve) => dockerd?.once('exit', resolve));
    dockerd.kill('SIGTERM');
    await exited;
  }
  rmSync(scratch, { recursive: true, force: true });
});

describe('the container image', () => {
  before(() => {
    scratch = mkdtempSync(join(tmpdir(), 'petstore-image-test-'));
  });

  test('when the image test starts, then Docker answers (installed and started if need be) and the base image is here (pulled, or a stand-in built)', async (t) => {
    await ensureDocker(t);
    await ensureBase(t);
  });

  test('when the Dockerfile is built, then the image has only the runtime dependencies and dist/, runs node as the node user with /data as its volume, and is lean', async (t) => {
    const started = Date.now();
    const build = spawnSync('docker', ['build', '--network', 'host', '-t', IMAGE, '.'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      // The classic builder: it builds on a base image present here without asking a registry about it.
      env: { ...process.env, DOCKER_BUILDKIT: '0' },
    });
    assert.equal(build.status, 0, `docker build failed:\n${build.stdout.slice(-4000)}\n${build.stderr}`);
    t.diagnostic(`build: ${IMAGE} built in ${seconds(started)}`);

    const [image, base] = await Promise.all(
      [IMAGE, BASE].map(async (name) =>
        Number(await docker(['image', 'inspect', '--format', '{{.Size}}', name])),
      ),
    );
    const added = (image as number) - (base as number);
    t.diagnostic(`size: ${MB(image as number)} in all, ${MB(added)} above ${BASE} (${MB(base as number)})`);
    assert.ok(added < MAX_ADDED_MB * 1e6, `the image adds ${MB(added)} to its base`);

    const config = JSON.parse(await docker(['image', 'inspect', '--format', '{{json .Config}}', IMAGE]));
    assert.equal(config.User, 'node');
    assert.deepEqual(config.Entrypoint, ['node', 'dist/cli/main.js'], 'node itself is the entry point');
    assert.deepEqual(config.Cmd, ['serve']);
    assert.deepEqual(Object.keys(config.Volumes ?? {}), ['/data']);
    assert.ok(config.Env.includes('DATABASE_URL=sqlite:/data/petstore.db'), config.Env.join(' '));
    assert.ok(config.Env.includes('HOST=0.0.0.0'), config.Env.join(' '));
    const check = (config.Healthcheck?.Test ?? []).join(' ');
    assert.match(check, /^CMD node -e .*\/healthz/, 'the health check asks /healthz with node');
    assert.doesNotMatch(check, /curl|wget/);

    const contents = JSON.parse(
      await docker([
        'run',
        '--rm',
        '--read-only',
        '--entrypoint',
        'node',
        IMAGE,
        '-e',
        `const fs = require('node:fs');
         const { execSync } = require('node:child_process');
         const resolvable = (m) => { try { require.resolve(m, { paths: ['/app'] }); return true; } catch { return false; } };
         const found = (c) => { try { execSync('command -v ' + c, { stdio: 'ignore' }); return true; } catch { return false; } };
         console.log(JSON.stringify({
           app: fs.readdirSync('/app').sort(),
           dev: ['typescript', 'tsx', '@biomejs/biome', 'fast-check', 'express', 'playwright-core'].filter(resolvable),
           runtime: ['fastify', 'pg', 'better-sqlite3'].filter(resolvable),
           tools: ['g++', 'make', 'python3', 'curl', 'wget'].filter(found),
           uid: process.getuid(),
         }));`,
      ]),
    );
    assert.equal(await docker(['run', '--rm', IMAGE, '--version']), VERSION);
    assert.deepEqual(contents.app, ['dist', 'node_modules', 'package.json', 'packages']);
    assert.deepEqual(contents.dev, [], 'no development dependency');
    assert.deepEqual(contents.runtime, ['fastify', 'pg', 'better-sqlite3']);
    assert.deepEqual(contents.tools, [], 'no compiler, no download tool');
    assert.equal(contents.uid, 1000);
  });

  test('when it runs on SQLite with a volume, then it serves as uid 1000 on a read-only root, prints the first key, turns healthy, and a pet created survives docker restart', async (t) => {
    const volume = `petstore-image-test-${process.pid}`;
    volumes.add(volume);
    const { name, url } = await startContainer(`petstore-sqlite-${process.pid}`, {}, [
      '-v',
      `${volume}:/data`,
      '--health-interval',
      '1s',
    ]);
    await listening(name);
    const key = /^ {2}(pst_[A-Za-z0-9_-]{43})$/m.exec(await logs(name))?.[1];
    assert.ok(key, 'the first start prints the first key');
    const rex = await createPet(url, key, 'Rex');

    assert.equal(
      await poll('the health check', async () => ((await health(name)) === 'healthy' ? true : undefined)),
      true,
    );
    t.diagnostic('sqlite: served, first key printed, healthy by its HEALTHCHECK');

    const who = JSON.parse(
      await inContainer(
        name,
        `const fs = require('node:fs');
         const refused = (path) => { try { fs.writeFileSync(path, ''); fs.rmSync(path); return 'written'; } catch (e) { return e.code; } };
         console.log(JSON.stringify({
           uid: process.getuid(), gid: process.getgid(),
           pid1: fs.readFileSync('/proc/1/cmdline', 'utf8').split('\\0').filter(Boolean),
           app: refused('/app/x'), tmp: refused('/tmp/x'), root: refused('/x'), data: refused('/data/x'),
         }));`,
      ),
    );
    assert.deepEqual(who, {
      uid: 1000,
      gid: 1000,
      pid1: ['node', 'dist/cli/main.js', 'serve'],
      app: 'EROFS',
      tmp: 'EROFS',
      root: 'EROFS',
      data: 'written',
    });
    t.diagnostic('sqlite: process 1 is node, as uid 1000, root filesystem read-only, /data writable');

    const created = await docker(['exec', name, 'petstore', 'keys', 'create', '--name', 'ops']);
    assert.equal(
      (await listPets(url, created)).length,
      1,
      'a key made with docker exec … petstore keys create works',
    );

    await docker(['restart', '--time', String(STOP_GRACE_S), name]);
    await listening(name, 2);
    assert.deepEqual(await listPets(url, key), [
      { id: rex.id, name: 'Rex', categoryId: 1, status: 'available' },
    ]);
    const text = await logs(name);
    assert.equal(text.split('No API key existed').length - 1, 1, 'the restart made no second key');
    assert.equal(
      await docker(['inspect', '--format', '{{.RestartCount}} {{.State.Status}}', name]),
      '0 running',
    );
    t.diagnostic('sqlite: the pet survived docker restart, with its key');
  });

  test('when docker stop arrives while a request is in flight, then the request is answered, the container exits 0 within the grace period, and the pet is stored', async (t) => {
    const name = `petstore-sqlite-${process.pid}`;
    const url = `http://127.0.0.1:${JSON.parse(
      await docker(['inspect', '--format', '{{json .Config.Env}}', name]),
    )
      .find((v: string) => v.startsWith('PORT='))
      .slice(5)}`;
    const key = /^ {2}(pst_[A-Za-z0-9_-]{43})$/m.exec(await logs(name))?.[1] as string;

    // A create begun, its body half sent: the service has accepted it (100 Continue) when the stop comes.
    const body = JSON.stringify({ name: 'Late', categoryId: 2 });
    const socket: Socket = connect(Number(new URL(url).port), '127.0.0.1');
    let received = '';
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
    });
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.write(
      [
        'POST /v1/pets HTTP/1.1',
        'Host: 127.0.0.1',
        `Authorization: Bearer ${key}`,
        'Content-Type: application/json',
        `Content-Length: ${body.length}`,
        'Expect: 100-continue',
        '',
        '',
      ].join('\r\n'),
    );
    await poll('100 Continue', () => (received.startsWith('HTTP/1.1 100 Continue') ? true : undefined));
    socket.write(body.slice(0, 5));

    const stopping = Date.now();
    const stop = docker(['stop', '--time', String(STOP_GRACE_S), name]);
    await poll('the service to be told', async () =>
      (await logs(name)).includes('"msg":"shutting down"') ? true : undefined,
    );
    socket.write(body.slice(5));
    await stop;
    const took = Date.now() - stopping;
    await closed;

    const answer = received.slice(received.indexOf('\r\n\r\n') + 4);
    assert.match(answer, /^HTTP\/1\.1 201 Created\r\n/, received);
    assert.match(answer, /\r\nconnection: close\r\n/i, 'answered with Connection: close while draining');
    assert.equal(await docker(['inspect', '--format', '{{.State.ExitCode}}', name]), '0');
    assert.ok(took < STOP_GRACE_S * 1000, `docker stop took ${took} ms`);
    t.diagnostic(
      `stop: the request in flight answered 201, exit code 0, docker stop took ${(took / 1000).toFixed(1)} s of its ${STOP_GRACE_S} s`,
    );

    await docker(['start', name]);
    await listening(name, 3);
    assert.deepEqual(
      ((await listPets(url, key)) as { name: string }[]).map((pet) => pet.name),
      ['Rex', 'Late'],
    );
    await docker(['stop', '--time', String(STOP_GRACE_S), name]);

    // The data is the volume's: a new container on it finds the keys (the first, and the one docker exec made).
    const volume = `petstore-image-test-${process.pid}`;
    const keys = JSON.parse(
      await docker(['run', '--rm', '--read-only', '-v', `${volume}:/data`, IMAGE, 'keys', 'list', '--json']),
    ) as { name: string }[];
    assert.deepEqual(keys.map((k) => k.name).sort(), ['first key (created at first start)', 'ops']);
  });

  test('when two containers run on the machine’s PostgreSQL, then each serves the pets the other created', async (t) => {
    let database: ThrowawayDatabase;
    try {
      database = await createDatabase(POSTGRES_TEST_URL, 'petstore_image');
    } catch (error) {
      throw new Error(`PostgreSQL is needed (${POSTGRES_TEST_URL}): ${(error as Error).message}`);
    }
    t.after(() => database.drop());
    const env = { DATABASE_URL: database.url, PETSTORE_API_KEYS: KEY };
    const [a, b] = await Promise.all(
      ['a', 'b'].map((node) => startContainer(`petstore-postgres-${node}-${process.pid}`, env)),
    );
    await Promise.all([listening(a?.name as string), listening(b?.name as string)]);
    const nodeA = a as { name: string; url: string };
    const nodeB = b as { name: string; url: string };

    for (const name of ['Rex', 'Tom', 'Bella']) await createPet(nodeA.url, KEY, name);
    await createPet(nodeB.url, KEY, 'Max');
    const fromA = await listPets(nodeA.url, KEY);
    assert.equal(fromA.length, 4);
    assert.deepEqual(await listPets(nodeB.url, KEY), fromA);
    t.diagnostic('postgres: two containers, one database: each lists the 4 pets both created');

    for (const node of [nodeA, nodeB]) {
      await docker(['stop', '--time', String(STOP_GRACE_S), node.name]);
      assert.equal(await docker(['inspect', '--format', '{{.State.ExitCode}}', node.name]), '0');
    }
  });

  test('when compose.yaml is read by Compose, then it is valid: two replicas, PostgreSQL, Redis and HAProxy, checked on /readyz', async (t) => {
    const compose = composeCommand(t);
    const { status, stdout, stderr } = composeConfig(compose, { POSTGRES_PASSWORD });
    assert.equal(status, 0, stderr);
    t.diagnostic(`compose: ${compose.join(' ')} config: valid`);
    const services = (/^services:\n([\s\S]*?)^\S/m.exec(stdout)?.[1] ?? '')
      .split('\n')
      .filter((line) => /^ {2}\S/.test(line))
      .map((line) => line.trim().replace(/:$/, ''));
    assert.deepEqual(services.sort(), ['haproxy', 'petstore', 'postgres', 'redis']);
    assert.match(stdout, /replicas: 2/);
    assert.match(stdout, /127\.0\.0\.1:3000\/readyz/, 'the replicas are checked on /readyz');
    assert.match(stdout, /image: haproxy:/);

    // HAProxy's own check of its configuration, with Debian's HAProxy in a container of the base image.
    const cfg = readFileSync(join(REPO_ROOT, 'deploy/haproxy.cfg'), 'utf8');
    assert.match(cfg, /^ {2}option httpchk GET \/readyz$/m);
    const checked = await docker([
      'run',
      '--rm',
      '--network',
      'host',
      '-v',
      `${join(REPO_ROOT, 'deploy/haproxy.cfg')}:/haproxy.cfg:ro`,
      BASE,
      'sh',
      '-c',
      'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null 2>&1 && haproxy -v | head -n 1 && haproxy -c -f /haproxy.cfg',
    ]);
    assert.match(checked, /Configuration file is valid/);
    t.diagnostic(`compose: deploy/haproxy.cfg valid (${checked.split('\n')[0]})`);
  });
});
