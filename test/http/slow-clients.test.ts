import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { type RunningServer, startServer } from '../../src/server.js';
import { after, before, httpLayerBackends, type TestDatabase, test } from '../support/backends.js';
import { assertRawError, parseRawResponse } from '../support/raw-http.js';
import { TEST_KEY, testConfig } from '../support/test-server.js';

/** Short limits, so the server's own timeouts (not the test's patience) end the trickles quickly. */
const TIMEOUTS = { HEADERS_TIMEOUT_MS: '500', REQUEST_TIMEOUT_MS: '1000' };
/** A trickle sends one small piece this often: never idle long, never done. */
const TRICKLE_EVERY_MS = 100;
/** A guard against a server that never cuts the client off, so the test fails instead of hanging. */
const GIVE_UP_AFTER_PIECES = 300;

interface Trickle {
  /** Resolves, when the server closes the connection, to what it sent back. */
  closed: Promise<Buffer>;
}

/** Opens a connection, sends `head` and then `piece` again and again until the server hangs up. */
function trickle(port: number, head: string, piece: string): Trickle {
  const socket: Socket = connect({ host: '127.0.0.1', port });
  const received: Buffer[] = [];
  let sent = 0;
  let timer: NodeJS.Timeout | undefined;
  const closed = new Promise<Buffer>((resolve, reject) => {
    socket.on('data', (data: Buffer) => received.push(data));
    socket.on('error', () => undefined); // a reset after the answer must not hide the answer
    socket.on('close', () => {
      clearInterval(timer);
      resolve(Buffer.concat(received));
    });
    socket.on('connect', () => {
      socket.write(head);
      timer = setInterval(() => {
        if (++sent > GIVE_UP_AFTER_PIECES) {
          clearInterval(timer);
          socket.destroy();
          reject(new Error('the server never closed a trickling connection'));
        } else if (!socket.destroyed) socket.write(piece);
      }, TRICKLE_EVERY_MS);
    });
  });
  return { closed };
}

/** DECISIONS.md "Slow clients": a 408 Error body with Connection: close, and nothing after it. */
function assertTimedOut(answer: Buffer, message?: string): void {
  const res = parseRawResponse(answer);
  assertRawError(
    res,
    408,
    'request_timeout',
    message ?? /^the request (headers|body) did not arrive in time$/,
  );
  assert.equal(res.headers.connection, 'close');
  assert.equal(res.headers['content-length'], String(Buffer.byteLength(res.body)));
}

for (const backend of httpLayerBackends) {
  backend.describe(`slow clients (${backend.name})`, () => {
    let database: TestDatabase;
    let server: RunningServer;
    let port: number;
    before(async () => {
      database = await backend.create();
      server = await startServer(testConfig(database.url, TIMEOUTS));
      port = Number(new URL(server.url).port);
    });
    after(async () => {
      await server?.close();
      await database?.drop();
    });

    test('when a client trickles its headers and never ends them, then it gets 408 request_timeout with Connection: close and is disconnected', async () => {
      const { closed } = trickle(port, 'GET /v1/pets HTTP/1.1\r\nHost: localhost\r\n', 'X-Slow: 1\r\n');
      assertTimedOut(await closed, 'the request headers did not arrive in time');
    });

    test('when a client trickles its body and never finishes it, then it gets 408 request_timeout with Connection: close and is disconnected', async () => {
      const head = [
        'POST /v1/pets HTTP/1.1',
        'Host: localhost',
        `Authorization: Bearer ${TEST_KEY}`,
        'Content-Type: application/json',
        'Content-Length: 1000',
        '',
        '{"name":"',
      ].join('\r\n');
      assertTimedOut(await trickle(port, head, 'a').closed, 'the request body did not arrive in time');
    });

    test('when a client connects and sends nothing at all, then the connection is closed without an answer', async () => {
      const socket = connect({ host: '127.0.0.1', port });
      const received: Buffer[] = [];
      socket.on('data', (data: Buffer) => received.push(data));
      await new Promise((resolve) => socket.on('close', resolve));
      assert.equal(Buffer.concat(received).toString('latin1'), '');
    });

    test('when 50 clients trickle at once, then normal requests are still served and every trickler gets its 408 and is cut off', async () => {
      const tricklers = Array.from({ length: 50 }, (_, i) =>
        i % 2
          ? trickle(port, 'GET /v1/pets HTTP/1.1\r\nHost: localhost\r\n', 'X-Slow: 1\r\n')
          : trickle(
              port,
              `POST /v1/pets HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TEST_KEY}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`,
              ' ',
            ),
      );
      for (let i = 0; i < 5; i++) {
        const res = await fetch(`${server.url}/v1/pets`, {
          headers: { authorization: `Bearer ${TEST_KEY}` },
        });
        assert.equal(res.status, 200);
        await res.arrayBuffer();
      }
      const created = await fetch(`${server.url}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Served meanwhile', categoryId: 1 }),
      });
      assert.equal(created.status, 201);
      const answers = await Promise.all(tricklers.map((t) => t.closed));
      for (const answer of answers) assertTimedOut(answer);
    });
  });
}
