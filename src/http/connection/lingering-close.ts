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
 * What every lingering connection of a node may read and throw away together: a burst of two whole
 * LINGER_MAX_BYTES (two clients each sending a 64 MiB body before reading their 413), then this many a
 * second (about 1 Gbit/s, so that uploads refused one after another still read their answers). Past
 * it, the connections that are still sending are dropped. Without it, 20 connections that kept sending
 * after their 413 made a node discard 5.8 GB in 10 s, at 123% of a core.
 */
export const LINGER_NODE_BURST_BYTES = 2 * LINGER_MAX_BYTES;
export const LINGER_NODE_BYTES_PER_SECOND = 128 * 1024 * 1024;

interface Lingering {
  /** socket.bytesRead when it began, and at the last check. */
  start: number;
  seen: number;
  started: number;
}

/** The connections lingering now, checked together on one timer. */
const lingering = new Map<Socket, Lingering>();
/** Bytes discarded beyond what the node's rate has paid back: past the burst, senders are dropped. */
let debt = 0;
let paidUntil = 0;
let checker: NodeJS.Timeout | undefined;

function check(): void {
  const now = Date.now();
  debt = Math.max(0, debt - (LINGER_NODE_BYTES_PER_SECOND * (now - paidUntil)) / 1000);
  paidUntil = now;
  const sending: Socket[] = [];
  for (const [socket, state] of lingering) {
    const read = socket.bytesRead;
    if (read - state.start > LINGER_MAX_BYTES || now - state.started >= LINGER_MAX_MS) {
      socket.destroy();
      continue;
    }
    if (read > state.seen) sending.push(socket);
    debt += read - state.seen;
    state.seen = read;
  }
  if (debt > LINGER_NODE_BURST_BYTES) for (const socket of sending) socket.destroy();
}

/**
 * Closes a connection in stages (RFC 9112 §9.6): the answer already written goes out, followed by a
 * FIN; what the client still sends is read and discarded until it closes its side, or a bound above
 * is reached (its own, or the node's). Closing at once instead, with the client's bytes unread, makes
 * the kernel send a TCP reset, and a client that has not yet read the answer (a 401, a 413, a 415, a
 * 408 sent while it uploads) loses it and sees only the reset.
 *
 * The bytes are read by whoever reads the socket already (Node's HTTP parser discards the rest of a
 * body nobody reads); a 'data' listener here would take the socket from the parser mid-stream, so
 * they are counted from socket.bytesRead every LINGER_CHECK_MS (a fast client gets past a bound by
 * what loopback carries in that time, about 25 MB at 2.5 GB/s, before the check sees it).
 */
export function closeLingering(socket: Socket): void {
  if (socket.destroyed || lingering.has(socket)) return;
  socket.end();
  lingering.set(socket, { start: socket.bytesRead, seen: socket.bytesRead, started: Date.now() });
  if (!checker) {
    checker = setInterval(check, LINGER_CHECK_MS);
    checker.unref();
  }
  socket.once('end', () => socket.destroy());
  socket.once('close', () => {
    lingering.delete(socket);
    if (lingering.size === 0) {
      clearInterval(checker);
      checker = undefined;
    }
  });
  socket.resume();
}
