import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { describe, test } from 'node:test';
import {
  DRAIN_GRACE_MS,
  GuardedServer,
  MAX_PIPELINED,
  MAX_WAITING,
} from '../../src/http/connection/connections.js';

/**
 * The service's HTTP server with a handler that holds every request until told to answer, so what is
 * worked on at once can be counted without any clock.
 */
async function heldServer() {
  const held: (() => void)[] = [];
  let active = 0;
  let most = 0;
  let handled = 0;
  const arrived: (() => void)[] = [];
  const server = new GuardedServer({}, (request, response) => {
    handled++;
    active++;
    most = Math.max(most, active);
    held.push(() => {
      active--;
      response.end(`answer to ${request.url}\n`);
    });
    arrived.shift()?.();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    counts: () => ({ handled, most }),
    /** Resolves once `n` requests in all have reached the handler. */
    handledReaches: (n: number) =>
      new Promise<void>((resolve) => {
        const check = () => (handled >= n ? resolve() : arrived.push(check));
        check();
      }),
    /** Answers every request held so far, and every later one as it comes. */
    answerAll: () => {
      const release = () => {
        for (const answer of held.splice(0)) answer();
      };
      release();
      arrived.push(function again() {
        release();
        arrived.push(again);
      });
    },
    /** Answers whatever is held and closes every connection. */
    stop: () => {
      for (const answer of held.splice(0)) answer();
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const pipelined = (n: number) =>
  Array.from({ length: n }, (_, i) => `GET /${i + 1} HTTP/1.1\r\nHost: x\r\n\r\n`).join('');

function open(port: number, text: string): { socket: Socket; received: () => string; closed: Promise<void> } {
  let data = '';
  const socket = connect(port, '127.0.0.1', () => socket.write(text));
  socket.on('data', (chunk) => {
    data += chunk.toString('latin1');
  });
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.on('error', () => undefined);
  return { socket, received: () => data, closed };
}

// A bound on each test: a connection the server fails to close would otherwise hang the run.
describe('pipelining bounds of the HTTP server', () => {
  test(`when a connection pipelines ${MAX_PIPELINED} + ${MAX_WAITING} requests, then ${MAX_PIPELINED} are worked on at once, the rest wait, and all are answered in order`, {
    timeout: 10_000,
  }, async (t) => {
    const server = await heldServer();
    t.after(() => server.stop());
    // The last of them asks the server to close the connection once it is answered.
    const total = MAX_PIPELINED + MAX_WAITING - 1;
    const client = open(
      server.port,
      `${pipelined(total)}GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    );
    await server.handledReaches(MAX_PIPELINED);
    // The rest arrived in the same read, yet none reached the handler while the first ones are held.
    assert.equal(server.counts().handled, MAX_PIPELINED);
    server.answerAll();
    await client.closed;
    const answered = [...client.received().matchAll(/answer to \/(\w+)/g)].map((m) => m[1]);
    assert.deepEqual(answered, [...Array.from({ length: total }, (_, i) => String(i + 1)), 'last']);
    assert.equal(server.counts().most, MAX_PIPELINED);
  });

  test(`when a connection pipelines more than ${MAX_PIPELINED} + ${MAX_WAITING} requests in one read, then it is closed, unanswered`, {
    timeout: 10_000,
  }, async (t) => {
    const server = await heldServer();
    t.after(() => server.stop());
    const client = open(server.port, pipelined(MAX_PIPELINED + MAX_WAITING + 1));
    await client.closed;
    assert.equal(client.received(), '');
    assert.equal(server.counts().handled, MAX_PIPELINED);
  });
});

describe('draining the HTTP server', () => {
  test(`when draining begins, then an idle keep-alive connection is closed ${DRAIN_GRACE_MS} ms later on the server's clock, not before`, async (t) => {
    const server = new GuardedServer({ keepAliveTimeout: 72_000 }, (_request, response) =>
      response.end('ok\n'),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const serverSide = new Promise<Socket>((resolve) => server.once('connection', resolve));
    const client = open((server.address() as { port: number }).port, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    const accepted = await serverSide;
    // Answered and kept alive: the connection is now idle.
    await new Promise<void>((resolve) => client.socket.once('data', () => resolve()));
    assert.match(client.received(), /^HTTP\/1\.1 200 OK\r\n/);
    assert.doesNotMatch(client.received(), /connection: close/i);

    // The grace period is a timer: moved by hand, so the bound is exact whatever the machine's load.
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const drained = server.drain();
    t.mock.timers.tick(DRAIN_GRACE_MS - 1);
    assert.equal(accepted.destroyed, false, 'still open just before the grace period ends');
    t.mock.timers.tick(1);
    assert.equal(accepted.destroyed, true, 'closed once it ends');
    t.mock.timers.reset();
    // Observed by the client too, and the drain completes.
    await client.closed;
    await drained;
    assert.equal(server.listening, false);
  });

  test('the grace period is the documented 1 s', () => {
    assert.equal(DRAIN_GRACE_MS, 1_000);
  });
});
