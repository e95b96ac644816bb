import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, beforeEach, describe, type TestContext, test } from 'node:test';
import { NetworkPolicy, parseNetworks } from '../../src/domain/network-policy.js';
import { MAX_ANSWER_BYTES, type SendResult, USER_AGENT, WebhookSender } from '../../src/webhooks/sender.js';

/**
 * The sender on undici against a receiver in this process (127.0.0.0/8 allowed): what it sends, what
 * it keeps of an answer, how each failure is described, and its pools per endpoint.
 */

const loopback = new NetworkPolicy(parseNetworks('127.0.0.0/8'));
const publicOnly = new NetworkPolicy(parseNetworks(''));

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
  socket: Socket;
}

describe('WebhookSender', () => {
  let receiver: Server;
  let port: number;
  const seen: Seen[] = [];
  const closedSockets = new Set<Socket>();
  let respond: (req: IncomingMessage, res: ServerResponse) => void;

  before(async () => {
    receiver = createServer({ keepAlive: true }, (req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => {
        body += chunk;
      });
      req.on('end', () => {
        seen.push({
          method: req.method ?? '',
          url: req.url ?? '',
          headers: req.headers,
          body,
          socket: req.socket,
        });
        respond(req, res);
      });
    });
    receiver.on('connection', (socket: Socket) => socket.on('close', () => closedSockets.add(socket)));
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    port = (receiver.address() as AddressInfo).port;
  });
  after(async () => {
    receiver.closeAllConnections();
    await new Promise((resolve) => receiver.close(resolve));
  });
  beforeEach(() => {
    seen.length = 0;
    respond = (_req, res) => res.writeHead(202).end('accepted');
  });

  /** One send by a new sender (destroyed when the test ends), the receiver answering with `answer`. */
  function sendOnce(
    t: TestContext,
    answer: typeof respond,
    { url = `http://127.0.0.1:${port}/`, timeoutMs = 5_000 } = {},
  ): Promise<SendResult> {
    const sender = new WebhookSender(loopback, { timeoutMs, connectionsPerEndpoint: 1 });
    t.after(() => sender.destroy());
    respond = answer;
    return sender.send(1n, url, {}, '{}');
  }

  /** Waits (a few turns of the event loop at most) for the receiver to see `socket` closed. */
  async function dropped(socket: Socket | undefined): Promise<void> {
    assert.ok(socket);
    for (let i = 0; i < 200 && !closedSockets.has(socket); i++)
      await new Promise((resolve) => setImmediate(resolve));
    assert.ok(closedSockets.has(socket), 'the connection is dropped');
  }

  test('when it sends, then it POSTs the body as JSON with the given headers and its user agent to the path and query, and resolves to the status and answer', async (t) => {
    const sender = new WebhookSender(loopback, { timeoutMs: 5_000, connectionsPerEndpoint: 1 });
    t.after(() => sender.destroy());
    const result = await sender.send(
      1n,
      `http://127.0.0.1:${port}/hook?a=1&b=2`,
      { 'webhook-id': '7' },
      '{"x":1}',
    );
    assert.deepEqual(result, { answered: true, status: 202, body: 'accepted' });
    assert.equal(seen.length, 1);
    const [request] = seen as [Seen];
    assert.equal(request.method, 'POST');
    assert.equal(request.url, '/hook?a=1&b=2');
    assert.equal(request.body, '{"x":1}');
    assert.equal(request.headers['content-type'], 'application/json');
    assert.equal(request.headers['user-agent'], USER_AGENT);
    assert.match(USER_AGENT, /^animal-store-webhooks\/\d/);
    assert.equal(request.headers['webhook-id'], '7');
  });

  test('when an answer is longer than 1 KiB, then only its first 1,024 bytes are kept; a shorter one whole', async (t) => {
    const sender = new WebhookSender(loopback, { timeoutMs: 5_000, connectionsPerEndpoint: 1 });
    t.after(() => sender.destroy());
    assert.equal(MAX_ANSWER_BYTES, 1024);
    const long = `${'a'.repeat(1_000)}${'b'.repeat(100)}${'c'.repeat(4_000)}`;
    respond = (_req, res) => {
      res.writeHead(500);
      res.write(long.slice(0, 1_000));
      setImmediate(() => res.end(long.slice(1_000)));
    };
    const cut = await sender.send(1n, `http://127.0.0.1:${port}/long`, {}, '{}');
    assert.deepEqual(cut, { answered: true, status: 500, body: long.slice(0, 1024) });
    respond = (_req, res) => res.writeHead(400).end('x'.repeat(1_023));
    const whole = await sender.send(2n, `http://127.0.0.1:${port}/short`, {}, '{}');
    assert.deepEqual(whole, { answered: true, status: 400, body: 'x'.repeat(1_023) });
    respond = (_req, res) => res.writeHead(204).end();
    assert.deepEqual(await sender.send(2n, `http://127.0.0.1:${port}/none`, {}, '{}'), {
      answered: true,
      status: 204,
      body: '',
    });
  });

  test('when an answer is cut short after its status, then what arrived is the answer', async (t) => {
    const answer = await sendOnce(t, (_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('partial', () => setImmediate(() => res.socket?.destroy()));
    });
    assert.deepEqual(answer, { answered: true, status: 200, body: 'partial' });
  });

  test('when the receiver closes the connection without an answer, or resets it, then "connection reset"', async (t) => {
    const closed = await sendOnce(t, (req) => req.socket.destroy());
    assert.deepEqual(closed, { answered: false, error: 'connection reset' });
    const reset = await sendOnce(t, (req) => req.socket.resetAndDestroy());
    assert.deepEqual(reset, { answered: false, error: 'connection reset' });
  });

  test('when the host name is not found, then "host not found"', async (t) => {
    const answer = await sendOnce(t, () => assert.fail('not reached'), { url: 'http://nosuchhost.invalid/' });
    assert.deepEqual(answer, { answered: false, error: 'host not found' });
  });

  test('when 1 KiB of an answer has arrived, then the attempt ends with it at once, and the connection is dropped', async (t) => {
    const answer = await sendOnce(
      t,
      (_req, res) => {
        res.writeHead(200, { 'content-length': '5000' });
        res.write('y'.repeat(1_024)); // and the rest never comes
      },
      { timeoutMs: 60_000 },
    );
    assert.deepEqual(answer, { answered: true, status: 200, body: 'y'.repeat(1_024) });
    await dropped(seen[0]?.socket);
  });

  test('when an answer is still arriving at timeoutMs, then "no answer within N ms", and the connection is dropped', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    let started!: () => void;
    const headed = new Promise<void>((resolve) => {
      started = resolve;
    });
    const answer = sendOnce(
      t,
      (_req, res) => {
        res.writeHead(200, { 'content-length': '5000' });
        res.write('z', () => started());
      },
      { timeoutMs: 250 },
    );
    await headed;
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    t.mock.timers.tick(250);
    assert.deepEqual(await answer, { answered: false, error: 'no answer within 250 ms' });
    t.mock.timers.reset();
    await dropped(seen[0]?.socket);
  });

  test('when nothing listens on the port, then "connection refused"', async (t) => {
    const sender = new WebhookSender(loopback, { timeoutMs: 5_000, connectionsPerEndpoint: 1 });
    t.after(() => sender.destroy());
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const free = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    assert.deepEqual(await sender.send(1n, `http://127.0.0.1:${free}/`, {}, '{}'), {
      answered: false,
      error: 'connection refused',
    });
  });

  test('when no answer comes within timeoutMs, then "no answer within N ms", and the request is aborted', async (t) => {
    const sender = new WebhookSender(loopback, { timeoutMs: 250, connectionsPerEndpoint: 1 });
    t.after(() => sender.destroy());
    let arrived!: () => void;
    const held = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    respond = () => arrived(); // never answered
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const result = sender.send(1n, `http://127.0.0.1:${port}/slow`, {}, '{}');
    await held;
    const socket = seen[0]?.socket;
    t.mock.timers.tick(249);
    t.mock.timers.tick(1);
    assert.deepEqual(await result, { answered: false, error: 'no answer within 250 ms' });
    t.mock.timers.reset();
    await dropped(socket);
  });

  test('when an attempt times out while queued behind another on the one connection, then it is never sent', async (t) => {
    const sender = new WebhookSender(loopback, { timeoutMs: 2_000, connectionsPerEndpoint: 1 });
    t.after(() => sender.destroy());
    const held: ServerResponse[] = [];
    let arrived!: () => void;
    const first = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    respond = (_req, res) => {
      held.push(res);
      arrived();
    };
    const answered = sender.send(1n, `http://127.0.0.1:${port}/first`, {}, '{}');
    await first;
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const queued = sender.send(1n, `http://127.0.0.1:${port}/queued`, {}, '{}');
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    t.mock.timers.tick(2_000);
    assert.deepEqual(await queued, { answered: false, error: 'no answer within 2000 ms' });
    t.mock.timers.reset();
    respond = (_req, res) => res.writeHead(202).end('accepted');
    held[0]?.writeHead(202).end('accepted');
    assert.equal((await answered).answered, true);
    await sender.send(1n, `http://127.0.0.1:${port}/third`, {}, '{}');
    assert.deepEqual(
      seen.map((request) => request.url),
      ['/first', '/third'],
    );
  });

  test('when a URL names a literal address the policy refuses, then it is refused without connecting, bracketed IPv6 too', async (t) => {
    const sender = new WebhookSender(publicOnly, { timeoutMs: 5_000, connectionsPerEndpoint: 1 });
    t.after(() => sender.destroy());
    assert.deepEqual(await sender.send(1n, `http://127.0.0.1:${port}/`, {}, '{}'), {
      answered: false,
      error: 'refused: 127.0.0.1 is not a public address',
    });
    assert.deepEqual(await sender.send(2n, `http://[::1]:${port}/`, {}, '{}'), {
      answered: false,
      error: 'refused: ::1 is not a public address',
    });
    assert.equal(seen.length, 0);
  });

  test('when a host name resolves only to refused addresses, then it is refused; when to a permitted one, it is connected to', async (t) => {
    const refusing = new WebhookSender(publicOnly, { timeoutMs: 5_000, connectionsPerEndpoint: 1 });
    t.after(() => refusing.destroy());
    assert.deepEqual(await refusing.send(1n, `http://localhost:${port}/`, {}, '{}'), {
      answered: false,
      error: 'refused: localhost resolves to no public address',
    });
    assert.equal(seen.length, 0);
    const allowing = new WebhookSender(loopback, { timeoutMs: 5_000, connectionsPerEndpoint: 1 });
    t.after(() => allowing.destroy());
    assert.deepEqual(await allowing.send(1n, `http://localhost:${port}/by-name`, {}, '{}'), {
      answered: true,
      status: 202,
      body: 'accepted',
    });
    assert.equal(seen[0]?.url, '/by-name');
  });

  test("when an endpoint's URL changes, then the new one is judged and used", async (t) => {
    const sender = new WebhookSender(loopback, { timeoutMs: 5_000, connectionsPerEndpoint: 1 });
    t.after(() => sender.destroy());
    await sender.send(1n, `http://127.0.0.1:${port}/first`, {}, '{}');
    await sender.send(1n, `http://127.0.0.1:${port}/second`, {}, '{}');
    assert.deepEqual(
      seen.map((request) => request.url),
      ['/first', '/second'],
    );
    assert.deepEqual(await sender.send(1n, `http://10.0.0.1:${port}/private`, {}, '{}'), {
      answered: false,
      error: 'refused: 10.0.0.1 is not a public address',
    });
  });

  test('when two attempts to one endpoint run at once with one connection each, then they share it; with two, each has its own', async (t) => {
    for (const connections of [1, 2]) {
      seen.length = 0;
      const sender = new WebhookSender(loopback, { timeoutMs: 5_000, connectionsPerEndpoint: connections });
      t.after(() => sender.destroy());
      const waiting: ServerResponse[] = [];
      respond = (_req, res) => {
        waiting.push(res);
        if (connections === 1 || waiting.length === 2) for (const held of waiting.splice(0)) held.end('ok');
      };
      await Promise.all([1, 2].map(() => sender.send(1n, `http://127.0.0.1:${port}/`, {}, '{}')));
      assert.equal(new Set(seen.map((request) => request.socket)).size, connections);
    }
  });

  test('when a 257th endpoint is sent to, then the least recently used pool is closed, and only it', async (t) => {
    const sender = new WebhookSender(loopback, { timeoutMs: 5_000, connectionsPerEndpoint: 1 });
    t.after(() => sender.destroy());
    const socketOf = new Map<bigint, Socket>();
    const send = async (endpointId: bigint) => {
      await sender.send(endpointId, `http://127.0.0.1:${port}/${endpointId}`, {}, '{}');
      socketOf.set(endpointId, seen.at(-1)?.socket as Socket);
    };
    for (let id = 1n; id <= 256n; id++) await send(id);
    await send(1n); // 2 is now the least recently used
    await send(257n);
    for (let i = 0; i < 100 && !closedSockets.has(socketOf.get(2n) as Socket); i++)
      await new Promise((resolve) => setImmediate(resolve));
    assert.equal(closedSockets.has(socketOf.get(2n) as Socket), true, "endpoint 2's pool is closed");
    assert.equal(closedSockets.has(socketOf.get(1n) as Socket), false);
    assert.equal(closedSockets.has(socketOf.get(3n) as Socket), false);
    assert.equal(closedSockets.has(socketOf.get(256n) as Socket), false);
  });

  test('when destroyed with an attempt under way, then the attempt ends at once, unanswered', async () => {
    const sender = new WebhookSender(loopback, { timeoutMs: 60_000, connectionsPerEndpoint: 1 });
    let arrived!: () => void;
    const held = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    respond = () => arrived();
    const result = sender.send(1n, `http://127.0.0.1:${port}/`, {}, '{}');
    await held;
    await sender.destroy();
    assert.deepEqual(await result, { answered: false, error: 'The client is destroyed' });
  });
});
