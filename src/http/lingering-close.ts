import type { Socket } from 'node:net';

/**
 * How long a connection closed after an early answer keeps reading what the client still sends.
 * nginx's `lingering_time` is 30 s; a client on this side of a load balancer sends at loopback or LAN
 * speed, so a few seconds cover a large upload, and a trickler holds its descriptor no longer.
 */
export const LINGER_MAX_MS = 5_000;

/**
 * How many bytes such a connection reads and throws away before it is dropped all the same: enough
 * for a client that sends a 64 MiB body whole before it reads the answer (as Node's http client and
 * curl do) to get its answer, and a bound on the work a client that never stops sending can cause.
 * Checked every LINGER_CHECK_MS (the bytes are read by Node's HTTP parser, which has no hook to count
 * them as they come), so a fast client gets past it by what loopback carries in that time (about 25 MB
 * at 2.5 GB/s) before the check sees it.
 */
export const LINGER_MAX_BYTES = 128 * 1024 * 1024;
export const LINGER_CHECK_MS = 10;

/**
 * Closes a connection in stages (RFC 9112 §9.6): the answer already written goes out, followed by a
 * FIN; what the client still sends is read and discarded until it closes its side, or a bound above
 * is reached. Closing at once instead, with the client's bytes unread, makes the kernel send a TCP
 * reset, and a client that has not yet read the answer (a 413, a 415, a 408 sent while it uploads)
 * loses it and sees only the reset.
 *
 * The bytes are read by whoever reads the socket already (Node's HTTP parser discards the rest of a
 * body nobody reads); a 'data' listener here would take the socket from the parser mid-stream.
 */
export function closeLingering(socket: Socket): void {
  if (socket.destroyed) return;
  socket.end();
  const start = socket.bytesRead;
  const started = Date.now();
  const check = setInterval(() => {
    if (socket.bytesRead - start > LINGER_MAX_BYTES || Date.now() - started >= LINGER_MAX_MS)
      socket.destroy();
  }, LINGER_CHECK_MS);
  check.unref();
  socket.once('end', () => socket.destroy());
  socket.once('close', () => clearInterval(check));
  socket.resume();
}
