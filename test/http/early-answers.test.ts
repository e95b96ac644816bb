import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import {
  LINGER_MAX_BYTES,
  LINGER_NODE_BURST_BYTES,
  LINGER_NODE_BYTES_PER_SECOND,
} from '../../src/http/connection/lingering-close.js';
import { type RunningServer, startServer } from '../../src/server.js';
import { after, backends, before, type TestDatabase, test } from '../support/backends.js';
import { assertErrorAnswer } from '../support/error-body.js';
import { TEST_KEY, testConfig } from '../support/test-server.js';

/**
 * An answer sent before the request's body was read (a 413 past the body limit, a 415 for a body that
 * does not decode) ends the connection. Dropping it at once, with the client's bytes unread, resets
 * it, and the client loses the answer: before the lingering close, 9 of 10 8 MiB uploads through a
 * keep-alive http.Agent failed with EPIPE. Each size is sent several times: a reset is a race.
 */
const MIB = 1024 * 1024;
const SIZES_MIB = [2, 8, 64];
const TRIES = 3;
const headers = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };

interface Answer {
  status: number;
  contentType: string | undefined;
  text: string;
}

/** POSTs `body` through a keep-alive http.Agent; rejects on any socket error (an EPIPE, a reset). */
function postThroughAgent(
  agent: Agent,
  url: string,
  body: Buffer,
  extra: Record<string, string> = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/v1/pets`,
      { method: 'POST', agent, headers: { ...headers, ...extra, 'content-length': body.length } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          // The upload may still be under way: the answer counts once the request is done too.
          req.once('close', () =>
            resolve({
              status: res.statusCode ?? 0,
              contentType: res.headers['content-type'],
              text: Buffer.concat(chunks).toString(),
            }),
          ),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function postThroughFetch(
  url: string,
  body: Buffer,
  extra: Record<string, string> = {},
): Promise<Answer> {
  const res = await fetch(`${url}/v1/pets`, { method: 'POST', headers: { ...headers, ...extra }, body });
  return {
    status: res.status,
    contentType: res.headers.get('content-type') ?? undefined,
    text: await res.text(),
  };
}

for (const backend of backends) {
  backend.describe(`answers sent before the body is read (${backend.name})`, () => {
    let database: TestDatabase;
    let server: RunningServer;
    before(async () => {
      database = await backend.create();
      server = await startServer(testConfig(database.url), { createFirstKey: false });
    });
    after(async () => {
      await server?.close();
      await database?.drop();
    });

    for (const mib of SIZES_MIB) {
      const body = Buffer.alloc(mib * MIB, ' ');
      test(`when a ${mib} MiB body is POSTed through fetch, then every request reads its 413 Error body`, async () => {
        for (let i = 0; i < TRIES; i++) {
          const answer = await postThroughFetch(server.url, body);
          assertErrorAnswer(answer, 413, 'payload_too_large', 'request body is too large', `try ${i + 1}`);
        }
      });

      test(`when a ${mib} MiB body is POSTed through a keep-alive http.Agent, then every request reads its 413 Error body and none fails with a reset`, async () => {
        const agent = new Agent({ keepAlive: true });
        try {
          for (let i = 0; i < TRIES; i++) {
            const answer = await postThroughAgent(agent, server.url, body);
            assertErrorAnswer(answer, 413, 'payload_too_large', 'request body is too large', `try ${i + 1}`);
          }
        } finally {
          agent.destroy();
        }
      });
    }

    test('when a body that does not decode is POSTed with Content-Encoding: gzip, then the client reads its 415', async () => {
      // A valid gzip header, then garbage: the decoder fails on the first chunk, before the upload ends
      // (just under the 64 KiB limit, which counts the bytes as sent too).
      const body = Buffer.concat([gzipSync('x').subarray(0, 10), Buffer.alloc(60 * 1024, 0xff)]);
      const agent = new Agent({ keepAlive: true });
      try {
        for (let i = 0; i < TRIES; i++) {
          const answer = await postThroughAgent(agent, server.url, body, { 'content-encoding': 'gzip' });
          assertErrorAnswer(answer, 415, 'unsupported_media_type', undefined, `try ${i + 1}`);
        }
      } finally {
        agent.destroy();
      }
    });
  });
}

/** One backend is enough: how long a closing connection reads is the HTTP layer's alone. */
const [backend] = backends;
backend?.describe('the lingering close is bounded', () => {
  let database: TestDatabase;
  let server: RunningServer;
  let port: number;
  before(async () => {
    database = await backend.create();
    server = await startServer(testConfig(database.url), { createFirstKey: false });
    port = Number(new URL(server.url).port);
  });
  after(async () => {
    await server?.close();
    await database?.drop();
  });

  /**
   * Declares a body of `declared` bytes, then sends with `send` until the server drops the connection
   * (or the guard gives up). A client that keeps its side open (allowHalfOpen) is what a lingering
   * close must not wait for forever.
   */
  interface Sender {
    write(chunk: Buffer): boolean;
    isDropped(): boolean;
    /** Resolves once the socket can take more, or is gone. */
    drained(): Promise<unknown>;
    destroy(): void;
  }
  function sendUntilDropped(
    declared: number,
    send: (sender: Sender) => Promise<void>,
    authorization = `Bearer ${TEST_KEY}`,
  ) {
    const socket = connect({ host: '127.0.0.1', port, allowHalfOpen: true });
    const received: Buffer[] = [];
    let written = 0;
    let dropped = false;
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', () => undefined); // the drop itself may be a reset: what matters is that it came
    const closed = new Promise<void>((resolve) =>
      socket.on('close', () => {
        dropped = true;
        resolve();
      }),
    );
    socket.write(
      `POST /v1/pets HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${authorization}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`,
    );
    const sending = send({
      write: (chunk) => {
        if (dropped) return false;
        written += chunk.length;
        return socket.write(chunk);
      },
      isDropped: () => dropped,
      drained: () =>
        new Promise((resolve) => {
          const done = () => {
            socket.off('drain', done).off('close', done);
            resolve(undefined);
          };
          socket.on('drain', done).on('close', done);
        }),
      destroy: () => socket.destroy(),
    });
    return closed.then(async () => {
      await sending;
      return { answer: Buffer.concat(received).toString('latin1'), written };
    });
  }

  test('when a client keeps sending as fast as it can after its 413, then it is dropped after at most about LINGER_MAX_BYTES', async () => {
    const chunk = Buffer.alloc(MIB, ' ');
    const { answer, written } = await sendUntilDropped(4 * LINGER_MAX_BYTES, async (client) => {
      for (let sent = 0; sent < 4 * LINGER_MAX_BYTES && !client.isDropped(); sent += chunk.length) {
        if (!client.write(chunk)) await client.drained();
      }
    });
    assert.match(answer, /^HTTP\/1\.1 413 /);
    // The socket buffers on both sides hold a few MiB the server never read, and a check interval's worth
    // gets past the bound before the check sees it (LINGER_CHECK_MS).
    assert.ok(written < 1.5 * LINGER_MAX_BYTES, `the client wrote ${written} bytes before it was dropped`);
    assert.ok(written < 4 * LINGER_MAX_BYTES, 'the client finished its upload: the server never dropped it');
  });

  test('when a client trickles after its 413 and never closes, then the server drops it all the same', async () => {
    const piece = Buffer.alloc(1024, ' ');
    const { answer, written } = await sendUntilDropped(2 * MIB, async (client) => {
      client.write(Buffer.alloc(128 * 1024, ' ')); // past the 64 KiB limit: the 413 comes at once
      // The guard (30 s at 100 ms a piece, far past LINGER_MAX_MS) fails the test rather than hang.
      for (let i = 0; i < 300 && !client.isDropped(); i++) {
        client.write(piece);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      client.destroy();
    });
    assert.match(answer, /^HTTP\/1\.1 413 /);
    assert.match(answer, /"code":"payload_too_large"/);
    assert.ok(written < 2 * MIB, `the trickler was not dropped before its body ended (${written} bytes)`);
  });

  test('when a client with a bad key sends a large body slowly, then it reads its 401 and is dropped like a 413 is, not read to the request timeout', async () => {
    const piece = Buffer.alloc(1024, ' ');
    let droppedByServer = false;
    const { answer } = await sendUntilDropped(
      64 * MIB,
      async (client) => {
        client.write(Buffer.alloc(16 * 1024, ' '));
        // The guard: 25 s at 100 ms a piece, beyond LINGER_MAX_MS and below REQUEST_TIMEOUT_MS (30 s).
        for (let i = 0; i < 250 && !client.isDropped(); i++) {
          client.write(piece);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        droppedByServer = client.isDropped();
        client.destroy();
      },
      'Bearer pst_notAKeyOfThisStore0123456789',
    );
    assert.match(answer, /^HTTP\/1\.1 401 /);
    assert.match(answer, /\r\nconnection: close\r\n/i);
    assert.match(answer, /"code":"unauthorized"/);
    assert.ok(droppedByServer, 'the server kept reading the body of a request it had refused');
  });

  test('when eight clients keep sending as fast as they can after their 413, then the node drops them once they have sent about LINGER_NODE_BURST_BYTES together, not eight times LINGER_MAX_BYTES', async () => {
    const chunk = Buffer.alloc(MIB, ' ');
    const limit = 4 * LINGER_MAX_BYTES;
    const started = performance.now();
    const results = await Promise.all(
      Array.from({ length: 8 }, () =>
        sendUntilDropped(limit, async (client) => {
          for (let sent = 0; sent < limit && !client.isDropped(); sent += chunk.length) {
            if (!client.write(chunk)) await client.drained();
          }
        }),
      ),
    );
    for (const { answer } of results) assert.match(answer, /^HTTP\/1\.1 413 /);
    const total = results.reduce((sum, { written }) => sum + written, 0);
    // What the node allows: the burst, and its rate for as long as they sent (on a busy machine the
    // clients are slow). Each client's socket buffers hold a few MiB the server never read, and a check
    // interval's worth of every client gets past the bound before the check sees it: half a burst more.
    const allowed =
      1.5 * LINGER_NODE_BURST_BYTES + (LINGER_NODE_BYTES_PER_SECOND * (performance.now() - started)) / 1000;
    assert.ok(total < allowed, `the clients wrote ${total} bytes together; the node allows ${allowed}`);
    assert.ok(total < 4 * LINGER_MAX_BYTES, 'far less than eight clients each within LINGER_MAX_BYTES');
  });
});
