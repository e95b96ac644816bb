/**
 * The container image, tested for real: `npm run test:image` (run by .ci/run; not part of `npm test`).
 * It needs Docker and, as root, gets it: installs docker.io when there is no dockerd, starts
 * `dockerd --iptables=false --bridge=none` when no daemon answers (and stops it at the end), and its
 * containers use the host's network (there is no default bridge). It builds the image from the Dockerfile as it is, on the official
 * Node.js image, or, when that cannot be pulled, on a stand-in built by stand-in-base.sh. Nothing is
 * skipped: what cannot be had fails the run, saying why. Each step reports what it found (build time,
 * image size) as a diagnostic line. Then it runs the Compose example (compose.yaml, with the few changes of
 * compose.test.yaml) on that image: PostgreSQL, Redis and HAProxy are their official images, or where
 * those cannot be pulled, stand-ins built from Debian's packages (stand-ins/). The example's own network,
 * the user-defined bridge compose.yaml declares, works with such a daemon as with any: --bridge=none
 * leaves out the default bridge only, and --iptables=false the NAT to the outside, which the example
 * does not need (its port is published by docker-proxy; the host reaches the containers on the bridge).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { BlockList, connect, isIP, type Socket } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
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

const DESCRIPTION = 'org.opencontainers.image.description';
/** What a stand-in is made from, as its label names it: the first 12 hex digits of their SHA-256. */
function hashOf(files: string[]): string {
  const hash = createHash('sha256');
  for (const file of files) hash.update(readFileSync(file));
  return hash.digest('hex').slice(0, 12);
}

/**
 * An image the tests need, under its official name: pulled; or, where no registry can be reached, a
 * stand-in made by `make`, which labels it `stand-in … <hash of sources>`. A stand-in made from other
 * sources (an older version of its script) is made again; an image pulled earlier is kept.
 */
async function ensureImage(
  t: TestContext,
  what: string,
  tag: string,
  sources: string[],
  make: (hash: string) => Promise<void>,
): Promise<void> {
  const started = Date.now();
  try {
    await docker(['pull', '-q', tag]);
    t.diagnostic(`${what}: ${tag} pulled (${seconds(started)})`);
    return;
  } catch (error) {
    const reason = String((error as { stderr?: string }).stderr ?? error)
      .trim()
      .split('\n')[0];
    t.diagnostic(`${what}: ${tag} cannot be pulled (${reason})`);
  }
  const description = await docker([
    'image',
    'inspect',
    '--format',
    `{{index .Config.Labels "${DESCRIPTION}"}}`,
    tag,
  ]).catch(() => undefined);
  const current = hashOf(sources);
  if (description !== undefined && (!description.includes('stand-in') || description.endsWith(current))) {
    t.diagnostic(`${what}: ${tag} is here already: ${description || 'an earlier pull'}`);
    return;
  }
  await make(current);
  t.diagnostic(`${what}: the stand-in ${tag} built in ${seconds(started)}`);
}

/** Runs a stand-in's script; what it prints becomes diagnostics. */
function runScript(t: TestContext, script: string, args: string[]): void {
  const build = spawnSync(script, args, { encoding: 'utf8' });
  assert.equal(build.status, 0, `${script} failed:\n${build.stdout}\n${build.stderr}`);
  for (const line of build.stdout.trim().split('\n')) t.diagnostic(line);
}

/** The official base image, pulled; or, where no registry can be reached, the stand-in. */
async function ensureBase(t: TestContext): Promise<void> {
  const script = join(REPO_ROOT, 'test/image/stand-in-base.sh');
  await ensureImage(t, 'base', BASE, [script], async () => runScript(t, script, [BASE, NODE_LINE]));
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

    // The container was stopped before (docker restart): its log says "shutting down" once already.
    const toldBefore = (await logs(name)).split('"msg":"shutting down"').length;
    const stopping = Date.now();
    const stop = docker(['stop', '--time', String(STOP_GRACE_S), name]);
    await poll('the service to be told', async () =>
      (await logs(name)).split('"msg":"shutting down"').length > toldBefore ? true : undefined,
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
});

/** The images compose.yaml runs beside the service's, and the stand-ins made for them (stand-ins/). */
const STAND_INS = join(REPO_ROOT, 'test/image/stand-ins');
const COMPOSE_YAML = readFileSync(join(REPO_ROOT, 'compose.yaml'), 'utf8');
/** The image compose.yaml names for one of its services. */
const composeImage = (service: string) =>
  new RegExp(`^ {2}${service}:\\n(?: {4}.*\\n|\\n)*? {4}image: (\\S+)$`, 'm').exec(
    COMPOSE_YAML,
  )?.[1] as string;

/**
 * The image compose.yaml names for `service`: pulled, or where no registry can be reached, a stand-in
 * built from stand-ins/<service>.Dockerfile on Debian's packages, itself on a stand-in of the Debian
 * image it names (stand-ins/debian.sh), with the network of the host (apt reaches the mirror).
 */
async function ensureStandIn(t: TestContext, service: string): Promise<void> {
  const tag = composeImage(service);
  assert.ok(tag, `compose.yaml names an image for ${service}`);
  const dockerfile = join(STAND_INS, `${service}.Dockerfile`);
  const base = /^FROM (debian:(\w+)-slim)$/m.exec(readFileSync(dockerfile, 'utf8'));
  assert.ok(base, `${dockerfile} builds on a debian:<suite>-slim image`);
  const debian = join(STAND_INS, 'debian.sh');
  const sources = readdirSync(STAND_INS)
    .filter((file) => file.startsWith(`${service}.`) || file.startsWith(`${service}-`))
    .map((file) => join(STAND_INS, file));
  await ensureImage(t, service, tag, [...sources, debian], async (hash) => {
    await ensureImage(t, service, base[1] as string, [debian], async () =>
      runScript(t, debian, [base[2] as string, base[1] as string]),
    );
    const build = spawnSync(
      'docker',
      [
        'build',
        '--network',
        'host',
        '-f',
        dockerfile,
        '--label',
        `${DESCRIPTION}=stand-in for the official ${tag}, built from test/image/stand-ins/${service}.Dockerfile ${hash}`,
        '-t',
        tag,
        STAND_INS,
      ],
      {
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
        env: { ...process.env, DOCKER_BUILDKIT: '0' },
      },
    );
    assert.equal(
      build.status,
      0,
      `docker build of ${tag} failed:\n${build.stdout.slice(-4000)}\n${build.stderr}`,
    );
  });
  const version = await docker([
    'image',
    'inspect',
    '--format',
    `{{index .Config.Labels "${DESCRIPTION}"}}`,
    tag,
  ]);
  t.diagnostic(`${service}: ${tag}: ${version || 'the official image'}`);
}

/** The project the example runs as: fixed, so a run that died is taken down by the next one first. */
const PROJECT = 'petstore-image-test';
/** Where HAProxy publishes the example (compose.yaml's `ports`). */
const EXAMPLE = 'http://127.0.0.1:8080';

/** Compose on compose.yaml and the test's changes to it (compose.test.yaml), as project PROJECT. */
async function composeRun(compose: string[], args: string[]): Promise<string> {
  const { POSTGRES_PASSWORD: _own, ...inherited } = process.env;
  const { stdout, stderr } = await run(
    compose[0] as string,
    [...compose.slice(1), '-p', PROJECT, '-f', 'compose.yaml', '-f', 'test/image/compose.test.yaml', ...args],
    { cwd: REPO_ROOT, env: { ...inherited, POSTGRES_PASSWORD }, maxBuffer: 64 * 1024 * 1024 },
  ).catch((error: { stdout?: string; stderr?: string; message: string }) => {
    throw new Error(
      `compose ${args.join(' ')} failed: ${error.message}\n${error.stdout ?? ''}${error.stderr ?? ''}`,
    );
  });
  return `${stdout}${stderr}`;
}

/** A condition within a bound of its own: the value, once `check` gives one, with the time it took. */
async function within<T>(
  what: string,
  ms: number,
  check: () => Promise<T | undefined>,
): Promise<{ value: T; took: number }> {
  const started = Date.now();
  for (;;) {
    const value = await check();
    if (value !== undefined) return { value, took: Date.now() - started };
    if (Date.now() - started > ms) throw new Error(`${what}: not within ${ms / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** A container's /metrics, from its METRICS_PORT (9464, unpublished), read inside it. */
const scrape = (container: string) =>
  docker([
    'exec',
    container,
    'node',
    '-e',
    "fetch('http://127.0.0.1:9464/metrics').then((r) => r.text()).then((t) => process.stdout.write(t))",
  ]);

/** The sum of a metric's samples whose labels include `labels`. */
function metric(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const sample = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (sample?.[1] !== name) continue;
    if (Object.entries(labels).every(([label, value]) => (sample[2] ?? '').includes(`${label}="${value}"`)))
      sum += Number(sample[3]);
  }
  return sum;
}

/** Creates answered 201 by each container: POST /v1/pets, by its own metrics. */
const creates = async (container: string) =>
  metric(await scrape(container), 'petstore_http_requests_total', {
    method: 'POST',
    route: '/v1/pets',
    status: '201',
  });

describe('the Compose example', () => {
  let compose: string[];
  /** The containers of a service, by name (petstore-image-test_petstore_1, …_2). */
  const containersOf = async (service: string) =>
    (await composeRun(compose, ['ps', '-q', service]))
      .split('\n')
      .filter((line) => /^[0-9a-f]{12,}$/.test(line));
  let key: string;
  /** Every pet whose create was answered 201 through HAProxy, by id; and those made with the endpoint in place. */
  const acknowledged = new Set<number>();
  const announced = new Set<number>();
  /** The webhook receiver on the host: the pet.created events it got, by pet id (how many times each). */
  const received = new Map<number, number>();
  let receiver: Server | undefined;
  const headers = () => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

  async function create(name: string): Promise<number> {
    const res = await fetch(`${EXAMPLE}/v1/pets`, {
      method: 'POST',
      headers: headers(),
      body: JSON.stringify({ name, categoryId: 1 }),
    });
    assert.equal(res.status, 201, await res.clone().text());
    const { id } = (await res.json()) as { id: number };
    acknowledged.add(id);
    return id;
  }

  /**
   * The volumes Docker made for the VOLUMEs of the project's images (the service's /data, Redis's /data),
   * kept for the file's after hook to remove: `compose down` without -v leaves them, and after it even
   * `down -v` no longer knows them.
   */
  async function keepVolumesToRemove(): Promise<void> {
    const ids = (
      await docker(['ps', '-a', '-q', '--filter', `label=com.docker.compose.project=${PROJECT}`])
    ).split('\n');
    for (const id of ids.filter(Boolean)) {
      const mounts = await docker(['inspect', '--format', '{{range .Mounts}}{{.Name}} {{end}}', id]);
      for (const name of mounts.split(' ').filter(Boolean)) volumes.add(name);
    }
  }

  /** HAProxy's log (since its container started). */
  const haproxyLog = async () => logs(((await containersOf('haproxy'))[0] as string) ?? '');
  /** The servers HAProxy took out: each "Server petstore/petstoreN is DOWN" or "is going DOWN" it logged. */
  const takenOut = async () =>
    (await haproxyLog()).match(/^Server petstore\/petstore\d+ is (?:going )?DOWN\b/gm) ?? [];

  /**
   * Until HAProxy answers GET /healthz through `count` replicas: its log names the server of each request
   * (option httplog), so the replicas it sends to are those it named for a 200.
   */
  async function answering(count: number): Promise<number> {
    const { took } = await within(`HAProxy to send to ${count} replicas`, 120_000, async () => {
      const res = await fetch(`${EXAMPLE}/healthz`).catch(() => undefined);
      await res?.arrayBuffer();
      if (res?.status !== 200) return undefined;
      const log = await haproxyLog();
      const servers = new Set(
        [...log.matchAll(/ http petstore\/(petstore\d+) \S+ 200 .*"GET \/healthz /g)].map((m) => m[1]),
      );
      return servers.size >= count ? true : undefined;
    });
    return took;
  }

  after(async () => {
    if (!compose) return;
    // Containers, network and volumes, whatever the tests' outcome.
    await keepVolumesToRemove().catch(() => undefined);
    await composeRun(compose, ['down', '-v', '--remove-orphans', '--timeout', '10']).catch(() => undefined);
    await new Promise((resolve) => (receiver ? receiver.close(resolve) : resolve(undefined)));
  });

  test('when compose.yaml’s images are needed, then PostgreSQL, Redis and HAProxy are here under the names it gives them: pulled, or stand-ins built from Debian’s packages', async (t) => {
    await ensureDocker(t);
    compose = composeCommand(t);
    for (const service of ['postgres', 'redis', 'haproxy']) await ensureStandIn(t, service);
  });

  test('when compose.yaml is read by Compose, then it is valid: two API replicas, one delivery service, PostgreSQL, Redis and HAProxy, checked on /readyz', async (t) => {
    const { status, stdout, stderr } = composeConfig(compose, { POSTGRES_PASSWORD });
    assert.equal(status, 0, stderr);
    t.diagnostic(`compose: ${compose.join(' ')} config: valid`);
    const services = (/^services:\n([\s\S]*?)^\S/m.exec(stdout)?.[1] ?? '')
      .split('\n')
      .filter((line) => /^ {2}\S/.test(line))
      .map((line) => line.trim().replace(/:$/, ''));
    assert.deepEqual(services.sort(), ['haproxy', 'petstore', 'petstore-deliver', 'postgres', 'redis']);
    const service = (name: string) =>
      new RegExp(`^ {2}${name}:\\n((?: {4}.*\\n)*)`, 'm').exec(stdout)?.[1] ?? '';
    assert.match(service('petstore'), /^ {4}command:\n {4}- serve\n {4}- --role\n {4}- api\n/m);
    assert.match(service('petstore'), /replicas: 2/);
    assert.match(service('petstore-deliver'), /^ {4}command:\n {4}- serve\n {4}- --role\n {4}- deliver\n/m);
    assert.match(service('petstore-deliver'), /replicas: 1/);
    for (const name of ['petstore', 'petstore-deliver'])
      assert.match(service(name), /127\.0\.0\.1:3000\/readyz/, `${name} is checked on /readyz`);
    assert.doesNotMatch(service('petstore-deliver'), /ports:/, 'the delivery service publishes nothing');
    assert.match(stdout, /image: haproxy:/);

    // HAProxy sends to the API replicas alone (Docker's DNS answers `petstore` with theirs only), and its
    // configuration is valid to the HAProxy compose.yaml runs.
    const cfg = readFileSync(join(REPO_ROOT, 'deploy/haproxy.cfg'), 'utf8');
    assert.match(cfg, /^ {2}http-check send meth GET uri \/readyz ver HTTP\/1\.1 hdr Host \S+$/m);
    assert.deepEqual([...cfg.matchAll(/^ {2}server(?:-template)? .*$/gm)].length, 1);
    assert.match(cfg, /^ {2}server-template petstore \d+ petstore:3000 /m);
    const checked = await docker([
      'run',
      '--rm',
      '-v',
      `${join(REPO_ROOT, 'deploy/haproxy.cfg')}:/usr/local/etc/haproxy/haproxy.cfg:ro`,
      composeImage('haproxy'),
      'sh',
      '-c',
      'haproxy -v | head -n 1 && haproxy -c -V -f /usr/local/etc/haproxy/haproxy.cfg',
    ]);
    assert.match(checked, /Configuration file is valid/);
    t.diagnostic(`compose: deploy/haproxy.cfg valid (${checked.split('\n')[0]})`);
  });

  test('when the example is started (compose up), then both API replicas answer through HAProxy', async (t) => {
    await docker(['image', 'inspect', IMAGE]).catch(() => {
      throw new Error(`${IMAGE} is needed: the image test builds it (run the whole file)`);
    });
    // What a run that died may have left, first.
    await composeRun(compose, ['down', '-v', '--remove-orphans']);
    const started = Date.now();
    await composeRun(compose, ['up', '-d', '--no-build']);
    t.diagnostic(
      `compose: up (PostgreSQL, Redis, 2 API replicas and the delivery service healthy) in ${seconds(started)}`,
    );
    const took = await answering(2);
    t.diagnostic(`compose: HAProxy sends to both replicas ${(took / 1000).toFixed(1)} s later`);

    const replicas = await containersOf('petstore');
    assert.equal(replicas.length, 2);
    key = await docker([
      'exec',
      replicas[0] as string,
      'petstore',
      'keys',
      'create',
      '--name',
      'compose-test',
    ]);
    assert.match(key, /^pst_[A-Za-z0-9_-]{43}$/);

    const before = await Promise.all(replicas.map(creates));
    for (let i = 0; i < 20; i++) await create(`Replica ${i}`);
    const served = (await Promise.all(replicas.map(creates))).map((n, i) => n - (before[i] as number));
    assert.equal(
      served.reduce((a, b) => a + b, 0),
      20,
      `${served}`,
    );
    assert.ok(
      served.every((n) => n > 0),
      `each replica served some of the 20 creates: ${served}`,
    );
    t.diagnostic(
      `compose: 20 creates through HAProxy: ${served.join(' and ')} by the two replicas (their /metrics)`,
    );
  });

  test('when a webhook endpoint on the host is registered, then the delivery service delivers every pet created, and the API replicas attempt none', async (t) => {
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => {
        body += chunk;
      });
      req.on('end', () => {
        try {
          const event = JSON.parse(body) as { type: string; data: { id: number } };
          if (req.headers['webhook-signature'] && event.type === 'pet.created')
            received.set(event.data.id, (received.get(event.data.id) ?? 0) + 1);
          res.writeHead(204).end();
        } catch {
          res.writeHead(400).end();
        }
      });
    });
    // On the host's address on the example's network: its bridge's (br-<the network's id>), the gateway
    // Docker chose in the subnet, which compose.test.yaml lets deliveries reach.
    const network = await docker(['network', 'inspect', '--format', '{{.Id}}', `${PROJECT}_default`]);
    const host = networkInterfaces()[`br-${network.slice(0, 12)}`]?.find((a) => a.family === 'IPv4')?.address;
    assert.ok(host, `the host has an address on the example's network (br-${network.slice(0, 12)})`);
    assert.match(host, /^172\.28\.0\.\d+$/, "in compose.yaml's subnet");
    await new Promise<void>((resolve) => receiver?.listen(0, host, resolve));
    const { port } = receiver.address() as { port: number };

    const res = await fetch(`${EXAMPLE}/v1/webhook-endpoints`, {
      method: 'POST',
      headers: headers(),
      body: JSON.stringify({ url: `http://${host}:${port}/hooks`, types: ['pet.created'] }),
    });
    assert.equal(res.status, 201, await res.text());

    const started = Date.now();
    for (let i = 0; i < 10; i++) announced.add(await create(`Hooked ${i}`));
    const { took } = await within('every pet.created delivered', 60_000, async () =>
      [...announced].every((id) => received.has(id)) ? true : undefined,
    );
    t.diagnostic(
      `webhooks: 10 creates, all 10 pet.created delivered to the host ${(took / 1000).toFixed(1)} s after the last (${((Date.now() - started) / 1000).toFixed(1)} s from the first create)`,
    );

    const [deliverer] = await containersOf('petstore-deliver');
    const delivered = metric(await scrape(deliverer as string), 'petstore_webhook_attempts_total', {
      outcome: 'succeeded',
    });
    assert.ok(delivered >= 10, `petstore-deliver counts ${delivered} deliveries`);
    const attempts = await Promise.all(
      (await containersOf('petstore')).map(async (c) =>
        metric(await scrape(c), 'petstore_webhook_attempts_total'),
      ),
    );
    assert.deepEqual(attempts, [0, 0], 'the API replicas attempt no delivery');
    t.diagnostic(
      `webhooks: petstore-deliver made ${delivered} deliveries, the API replicas ${attempts.join(' and ')}`,
    );
  });

  test('when an API replica is killed (docker kill), then HAProxy takes it out and the service answers', async (t) => {
    const [survivor, victim] = await containersOf('petstore');
    const down = (await takenOut()).length;
    const killed = Date.now();
    await docker(['kill', victim as string]);
    // Requests go on while HAProxy finds out: how they fare is reported, not asserted.
    const meanwhile = { answered: 0, failed: 0 };
    let noticed = false;
    const traffic = (async () => {
      while (!noticed) {
        // A request sent to the killed replica before HAProxy knew gets no answer: the bound cuts it short.
        const res = await fetch(`${EXAMPLE}/v1/pets?limit=1`, {
          headers: headers(),
          signal: AbortSignal.timeout(5_000),
        }).catch(() => undefined);
        if (res?.status === 200) meanwhile.answered++;
        else meanwhile.failed++;
        await res?.arrayBuffer();
      }
    })();
    const { took } = await within('HAProxy to mark the killed replica DOWN', 30_000, async () =>
      (await takenOut()).length > down ? true : undefined,
    ).finally(() => {
      noticed = true;
    });
    await traffic;
    t.diagnostic(
      `kill: HAProxy marked it DOWN ${(took / 1000).toFixed(1)} s after docker kill; meanwhile ${meanwhile.answered} requests answered 200, ${meanwhile.failed} not`,
    );

    const before = await creates(survivor as string);
    for (let i = 0; i < 20; i++) await create(`Survivor ${i}`);
    assert.equal((await creates(survivor as string)) - before, 20, 'the survivor served all 20');
    assert.equal(await docker(['inspect', '--format', '{{.State.Status}}', victim as string]), 'exited');
    t.diagnostic(
      `kill: then 20 creates through HAProxy, all 201, all by the surviving replica (${seconds(killed)} since the kill)`,
    );
  });

  test('when the example is taken down (compose down, not -v) with creates in flight and started again, then every pet acknowledged is there and delivered', async (t) => {
    // Creates one after another until told to stop: those answered 201 are acknowledged.
    let stop = false;
    const during = { acknowledged: 0, refused: 0 };
    const creating = (async () => {
      for (let i = 0; !stop; i++) {
        const res = await fetch(`${EXAMPLE}/v1/pets`, {
          method: 'POST',
          headers: headers(),
          body: JSON.stringify({ name: `Down ${i}`, categoryId: 1 }),
          signal: AbortSignal.timeout(10_000),
        }).catch(() => undefined);
        if (res?.status === 201) {
          const { id } = (await res.json()) as { id: number };
          acknowledged.add(id);
          announced.add(id);
          during.acknowledged++;
        } else {
          during.refused++;
          await res?.arrayBuffer();
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
    })();
    let downing = 0;
    let downTook = 0;
    try {
      await within('creates under way', 30_000, async () => (during.acknowledged >= 10 ? true : undefined));
      await keepVolumesToRemove();
      downing = Date.now();
      await composeRun(compose, ['down']);
      downTook = Date.now() - downing;
    } finally {
      stop = true;
      await creating;
    }
    t.diagnostic(
      `down: compose down in ${(downTook / 1000).toFixed(1)} s, creates going on throughout: ${during.acknowledged} acknowledged (from just before it), ${during.refused} not`,
    );
    assert.equal((await containersOf('petstore')).length, 0);
    // The signals each container got (Docker's events): the service and PostgreSQL stopped on their own
    // signal, SIGTERM and SIGINT, never killed when their grace period ran out.
    const signals = (
      await docker([
        'events',
        '--since',
        String(Math.floor(downing / 1000)),
        '--until',
        String(Math.ceil(Date.now() / 1000)),
        '--filter',
        'type=container',
        '--filter',
        'event=kill',
        '--format',
        '{{.Actor.Attributes.name}} {{.Actor.Attributes.signal}}',
      ])
    )
      .split('\n')
      .filter((line) => line.startsWith(`${PROJECT}_`))
      .map((line) => line.slice(PROJECT.length + 1));
    const killed = signals.filter((line) => line.endsWith(' 9')).map((line) => line.split(' ')[0]);
    for (const service of ['petstore_1', 'petstore-deliver_1', 'postgres_1'])
      assert.ok(!killed.includes(service), `${service} was killed: ${signals.join(', ')}`);
    assert.ok(
      signals.includes('postgres_1 2'),
      `PostgreSQL got SIGINT, its fast shutdown: ${signals.join(', ')}`,
    );
    t.diagnostic(`down: signals sent (Docker's events): ${signals.join(', ')}`);

    const upping = Date.now();
    await composeRun(compose, ['up', '-d', '--no-build']);
    await answering(2);
    t.diagnostic(`down: up again, HAProxy sending to both replicas, in ${seconds(upping)}`);

    const ids = [...acknowledged];
    const missing: number[] = [];
    for (let i = 0; i < ids.length; i += 100) {
      const chunk = ids.slice(i, i + 100);
      const query = chunk.map((id) => `id=${id}`).join('&');
      const res = await fetch(`${EXAMPLE}/v1/pets?limit=100&${query}`, { headers: headers() });
      assert.equal(res.status, 200);
      const found = new Set(((await res.json()) as { id: number }[]).map((pet) => pet.id));
      missing.push(...chunk.filter((id) => !found.has(id)));
    }
    assert.deepEqual(missing, [], 'every acknowledged pet is there');
    t.diagnostic(`down: all ${ids.length} acknowledged pets are there after down and up`);

    const { took } = await within('every acknowledged pet.created delivered', 60_000, async () =>
      [...announced].every((id) => received.has(id)) ? true : undefined,
    );
    t.diagnostic(
      `down: all ${announced.size} pet.created events delivered to the host (all in ${(took / 1000).toFixed(1)} s more, once the pets were found)`,
    );
  });
});
