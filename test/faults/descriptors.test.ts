import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, test } from 'node:test';
import { killAllCliProcesses, poll, type ServeProcess, startServe, tempDatabase } from '../support/cli.js';
import { freePort } from '../support/free-port.js';

after(killAllCliProcesses);

/** The child's descriptor limit; its default MAX_CONNECTIONS is half of it. */
const OPEN_FILE_LIMIT = 256;
const CAP = OPEN_FILE_LIMIT / 2;
/** More keep-alive clients than the process has descriptors. */
const CLIENTS = OPEN_FILE_LIMIT + 64;

/** A keep-alive client that made one request and then sits idle, as a pooled connection does. */
function idleClient(port: number): { socket: Socket; closed: Promise<void>; answered: Promise<boolean> } {
  const socket = connect({ host: '127.0.0.1', port });
  socket.on('error', () => undefined); // a connection closed on arrival may be reset: that is the point
  const answered = new Promise<boolean>((resolve) => {
    socket.once('data', () => resolve(true));
    socket.once('close', () => resolve(false));
  });
  socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
  return { socket, closed: new Promise((resolve) => socket.once('close', () => resolve())), answered };
}

/** One Prometheus sample's value, or undefined. */
function sample(text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

test(`when more keep-alive clients connect than the process has descriptors (ulimit -n ${OPEN_FILE_LIMIT}), then the node closes those past MAX_CONNECTIONS, counts them, never exits, and answers a fresh connection once others close`, async () => {
  await withFlood({}, async ({ serve, answered }) => {
    // Every connection within the cap was served (the start's own probe may hold one), every one past
    // it closed as it arrived.
    assert.ok(answered <= CAP && answered >= CAP - 2, `${answered} of ${CLIENTS} clients were answered`);
    const metrics = await freshScrape(serve.url);
    assert.equal(sample(metrics, 'petstore_http_connections_dropped_total'), CLIENTS - answered);
    const open = sample(metrics, 'petstore_http_connections');
    assert.ok(open !== undefined && open > 0 && open <= CAP, `petstore_http_connections ${open}`);
  });
});

test('when MAX_CONNECTIONS is set above the descriptor limit and accepting runs out of descriptors (EMFILE), then the node still never exits and serves once clients leave', async () => {
  // Nothing on a timer may throw at EMFILE: under-pressure's memory sample did, uncaught.
  await withFlood({ MAX_CONNECTIONS: String(OPEN_FILE_LIMIT * 4) }, async ({ serve }) => {
    assert.match(await freshScrape(serve.url), /^petstore_http_connections \d+$/m);
  });
});

/**
 * Starts a node with OPEN_FILE_LIMIT descriptors, floods it with CLIENTS idle keep-alive clients, checks
 * it outlives the sampling timers' next runs, lets some clients go, and hands over to `check`.
 */
async function withFlood(
  env: Record<string, string>,
  check: (flood: { serve: ServeProcess; answered: number }) => Promise<void>,
): Promise<void> {
  const database = tempDatabase();
  const port = await freePort();
  const serve = await startServe(
    { DATABASE_URL: database.url, PORT: String(port), LOG_LEVEL: 'warn', ...env },
    { openFileLimit: OPEN_FILE_LIMIT, stdout: 'ignore' },
  );
  const clients: ReturnType<typeof idleClient>[] = [];
  try {
    for (let i = 0; i < CLIENTS; i++) clients.push(idleClient(port));
    const answered = (await Promise.all(clients.map((c) => c.answered))).filter(Boolean).length;
    // The load shedder samples once a second; under-pressure's sample threw EMFILE at its next run.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    assert.equal(serve.running, true, `the node exited\n${serve.output()}`);
    for (const client of clients.slice(0, 32)) client.socket.destroy();
    await check({ serve, answered });
    assert.equal((await fetch(`${serve.url}/healthz`)).status, 200);
    assert.equal(serve.running, true, `the node exited\n${serve.output()}`);
  } finally {
    for (const client of clients) client.socket.destroy();
    await serve.stop();
    database.remove();
  }
}

/** GET /metrics on a fresh connection, once one is served again. */
function freshScrape(url: string): Promise<string> {
  return poll('a fresh connection to be served', async () => {
    const res = await fetch(`${url}/metrics`).catch(() => undefined);
    return res?.status === 200 ? res.text() : undefined;
  });
}
