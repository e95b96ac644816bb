import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { listenForMetrics, type MetricsListener } from '../../src/http/observability/metrics-listener.js';

/** Short limits, so the listener's own timeouts (not the test's patience) end the connections. */
const TIMEOUTS = { headersTimeoutMs: 300, requestTimeoutMs: 600 };
/** Far past the timeouts above, and far short of Node's defaults (60 s and 300 s): a guard, not a measure. */
const GIVE_UP_MS = 15_000;

/** Opens a connection, sends `first`, then `piece` every 100 ms; resolves with what came back once the server closes it. */
function holdOpen(port: number, first: string, piece?: string): Promise<string> {
  const socket = connect({ host: '127.0.0.1', port });
  const received: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => received.push(chunk));
  socket.on('error', () => undefined);
  socket.write(first);
  const trickle = piece === undefined ? undefined : setInterval(() => socket.write(piece), 100);
  return new Promise((resolve, reject) => {
    const guard = setTimeout(() => {
      socket.destroy();
      reject(new Error('the metrics listener kept the connection open'));
    }, GIVE_UP_MS);
    socket.on('close', () => {
      clearTimeout(guard);
      clearInterval(trickle);
      resolve(Buffer.concat(received).toString('latin1'));
    });
  });
}

describe('the metrics listener (METRICS_PORT) keeps the API port timeouts', () => {
  let listener: MetricsListener;
  before(async () => {
    listener = await listenForMetrics(
      '127.0.0.1',
      0,
      async () => ({ contentType: 'text/plain', text: 'up 1\n' }),
      TIMEOUTS,
    );
  });
  after(() => listener.close());

  test('when a client connects and sends nothing, then the connection is closed after HEADERS_TIMEOUT_MS', async () => {
    // Closed, with or without Node's bare 408 (a connection that asked nothing may simply be closed).
    assert.match(await holdOpen(listener.port, ''), /^$|^HTTP\/1\.1 408 /);
  });

  test('when a client trickles its headers, then it gets 408 and the connection is closed', async () => {
    const answer = await holdOpen(listener.port, 'GET /metrics HTTP/1.1\r\nHost: x\r\n', 'X-Slow: 1\r\n');
    assert.match(answer, /^HTTP\/1\.1 408 /);
  });

  test('when a scrape is asked for, then it is answered as before', async () => {
    const res = await fetch(`http://127.0.0.1:${listener.port}/metrics`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'up 1\n');
  });
});
