import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import {
  after,
  before,
  describe,
  POSTGRES_TEST_URL,
  postgres,
  type TestDatabase,
  test,
} from '../support/backends.js';
import {
  type CliProcess,
  jsonLines,
  killAllCliProcesses,
  oneLineFailure,
  poll,
  runCli,
  startServe,
  type TempDatabase,
  tempDatabase,
} from '../support/cli.js';
import { freePort } from '../support/free-port.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { TEST_KEY } from '../support/test-server.js';

after(killAllCliProcesses);

/** The processes the primary has forked, alive now (Linux's /proc). */
function workersOf(primary: CliProcess): number[] {
  const pid = primary.child.pid as number;
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number)
      .filter(isAlive);
  } catch {
    return [];
  }
}

/** A killed worker stays a child, as a zombie, until the primary reaps it: it is not a worker. */
function isAlive(pid: number): boolean {
  try {
    // /proc/<pid>/stat: "pid (comm) state …"; the name may hold spaces, so read after its last ")".
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^ [ZX]/.test(stat.slice(stat.lastIndexOf(')') + 1));
  } catch {
    return false; // gone already
  }
}

interface Outcome {
  status?: number;
  error?: string;
}

/** GET /v1/pets on a new connection; an answer, a refusal or a reset, or 'hung' past `timeoutMs`. */
function getOnNewConnection(port: number, timeoutMs = 10_000): Promise<Outcome> {
  return new Promise((resolve) => {
    const req = request({
      host: '127.0.0.1',
      port,
      path: '/v1/pets',
      agent: false,
      headers: { authorization: `Bearer ${TEST_KEY}` },
    });
    req.setTimeout(timeoutMs, () => {
      resolve({ error: 'hung' });
      req.destroy();
    });
    req.on('error', (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }));
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
    });
    req.end();
  });
}

/** Polls until GET /v1/pets answers 200 (the service serves again). */
const servesAgain = (port: number) =>
  poll('the service to answer 200 again', async () =>
    (await getOnNewConnection(port)).status === 200 ? true : undefined,
  );

async function startCluster(env: Record<string, string>): Promise<{ serve: CliProcess; port: number }> {
  // A fixed port: with PORT=0, workers that listen again after all of them died would get a new one.
  const port = await freePort();
  const serve = await startServe(
    {
      PORT: String(port),
      PETSTORE_API_KEYS: TEST_KEY,
      RATE_LIMIT_PER_SECOND: '0',
      LOG_REQUESTS: 'false',
      ...env,
    },
    { workers: 2 },
  );
  return { serve, port };
}

describe('serve --workers 2 on SQLite, with workers killed', () => {
  let database: TempDatabase;
  let serve: CliProcess;
  let port: number;

  before(async () => {
    database = tempDatabase();
    ({ serve, port } = await startCluster({ DATABASE_URL: database.url }));
  });
  after(async () => {
    await serve.kill();
    database.remove();
  });

  test('when a worker is killed, and its replacement is killed right after the fork, again and again, then the primary keeps replacing them and the service answers', async () => {
    // A signalled process may still look alive for a moment after kill() returns: the killed are
    // remembered so that "two workers again" never counts one of them.
    const killed = new Set<number>();
    const kill = (pid: number) => {
      killed.add(pid);
      process.kill(pid, 'SIGKILL');
    };
    for (let round = 0; round < 3; round++) {
      const before = workersOf(serve);
      assert.equal(before.length, 2, `round ${round}: two workers`);
      kill(before[0] as number);
      // The replacement, killed as soon as it exists: during its start-up.
      const replacement = await poll('a replacement to be forked', () =>
        workersOf(serve).find((pid) => !before.includes(pid) && !killed.has(pid)),
      );
      kill(replacement);
      await poll('two workers again', () => {
        const workers = workersOf(serve);
        return workers.length === 2 && workers.every((pid) => !killed.has(pid)) ? true : undefined;
      });
    }
    assert.ok(serve.running, `the primary is alive\n${serve.output()}`);
    await servesAgain(port);
    // The primary's lines: JSON, at error level, beside the workers' on stdout.
    const deaths = jsonLines(serve.stdout).filter((line) => String(line.msg).includes('starting another'));
    const messages = deaths.map((line) => String(line.msg)).join('\n');
    assert.ok(deaths.every((line) => line.level === 50 && line.pid === serve.child.pid));
    assert.match(messages, /worker \d+ died \(killed by SIGKILL\); starting another in \d+ ms/);
    assert.match(
      messages,
      /worker \d+ died before listening \(killed by SIGKILL\); starting another in \d+ ms/,
    );
    // Deaths in a row wait longer each time (back-off), rather than forking in a tight loop.
    const delays = deaths.map((line) => line.restartInMs as number);
    assert.ok(Math.max(...delays) > Math.min(...delays), `back-off grows: ${delays.join(', ')}`);
  });

  test('when both workers are killed under a flood of new connections, then every connection gets an answer or is closed, none is left hanging, and the service answers again', async () => {
    const outcomes: Outcome[] = [];
    let flooding = true;
    const client = async () => {
      while (flooding) outcomes.push(await getOnNewConnection(port));
    };
    const clients = Array.from({ length: 20 }, client);
    await poll('some answers before the kill', () => (outcomes.length > 50 ? true : undefined));
    for (const pid of workersOf(serve)) process.kill(pid, 'SIGKILL');
    await poll('answers after the kill', () => (outcomes.length > 400 ? true : undefined));
    flooding = false;
    await Promise.all(clients);
    const hung = outcomes.filter((outcome) => outcome.error === 'hung');
    assert.deepEqual(hung, [], 'no connection was left unanswered and open');
    assert.ok(outcomes.some((o) => o.status === 200));
    assert.ok(
      outcomes.every(
        (o) => o.status === 200 || ['ECONNRESET', 'ECONNREFUSED', 'socket hang up'].includes(o.error ?? ''),
      ),
      JSON.stringify(outcomes.filter((o) => o.status !== 200).slice(0, 5)),
    );
    await servesAgain(port);
    assert.ok(serve.running);
  });
});

postgres.describe('serve --workers 2 on PostgreSQL, with the database away and a worker killed', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let serve: CliProcess;
  let port: number;

  before(async () => {
    database = await postgres.create();
    proxy = await TcpProxy.start('127.0.0.1', Number(new URL(POSTGRES_TEST_URL).port || 5432));
    ({ serve, port } = await startCluster({
      DATABASE_URL: proxy.route(database.url),
      DATABASE_TIMEOUT_MS: '500',
    }));
  });
  after(async () => {
    await serve.kill();
    await proxy.close();
    await database.drop();
  });

  test('when a worker dies while PostgreSQL is away, then its replacements exit with the reason and are replaced with back-off until it is back, and then both serve', async () => {
    proxy.cut();
    const [victim] = workersOf(serve);
    process.kill(victim as number, 'SIGKILL');
    // Replacements cannot reach the database: each says why and exits, and another is forked.
    await serve.waitFor('two replacements that could not start', () =>
      (serve.stdout.match(/died before listening \(exit code 1\)/g)?.length ?? 0) >= 2 ? true : undefined,
    );
    const reasons = jsonLines(serve.stdout).filter((line) => line.level === 60);
    assert.match(
      String(reasons[0]?.msg),
      /^cannot start: .*(ECONNRESET|Connection terminated|timeout)/m,
      'a worker gave its reason, in a JSON line',
    );
    assert.ok(serve.running, 'the primary keeps going');

    proxy.resume();
    await poll('two workers listening', async () => {
      const workers = workersOf(serve);
      return workers.length === 2 && !workers.includes(victim as number) ? true : undefined;
    });
    await servesAgain(port);
    // Both serve: the surviving worker and the replacement answer on new connections.
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => getOnNewConnection(port)));
    assert.ok(
      outcomes.every((o) => o.status === 200),
      JSON.stringify(outcomes),
    );
  });
});

describe('start-up either completes or exits with one line', () => {
  test('when the port is in use, then serve exits non-zero with one line saying so', async () => {
    const busy = createServer().listen(0, '127.0.0.1');
    await new Promise((resolve) => busy.once('listening', resolve));
    const address = busy.address();
    const port = String(typeof address === 'object' && address ? address.port : 0);
    const database = tempDatabase();
    try {
      for (const args of [['serve'], ['serve', '--workers', '2']]) {
        const line = oneLineFailure(
          await runCli(args, { DATABASE_URL: database.url, PORT: port, LOG_LEVEL: 'warn' }),
        );
        assert.match(line, /^petstore: .*EADDRINUSE/, `${args.join(' ')}: ${line}`);
      }
    } finally {
      busy.close();
      database.remove();
    }
  });

  test('when the database cannot be reached, then serve exits non-zero with one line saying so', async () => {
    const closed = await freePort();
    const line = oneLineFailure(
      await runCli(['serve'], {
        DATABASE_URL: `postgres://postgres@127.0.0.1:${closed}/test`,
        DATABASE_TIMEOUT_MS: '500',
        PORT: '0',
      }),
    );
    assert.match(line, /^petstore: .*ECONNREFUSED/);
  });
});
