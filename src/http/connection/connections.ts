import { type IncomingMessage, Server, type ServerOptions, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { closeLingering } from './lingering-close.js';

/**
 * Requests of one connection handled at once. HTTP/1.1 pipelining lets a client send any number of
 * requests without reading an answer; Node parses every one that arrived in a read (about 1,400 small
 * GETs in 64 KiB) and would build every answer at once, held until the client reads. 110 connections
 * doing that took a node from 93 MB to 2.7 GB. Past this many, the rest wait, and the connection is
 * not read further until answers drain.
 */
export const MAX_PIPELINED = 4;

/**
 * Requests of one connection kept waiting, beyond which the connection is closed at once. Answering
 * instead would keep every request of the read in memory until the client reads the answers before
 * it, which a flooding client never does: 110 such connections then held 340 MB.
 */
export const MAX_WAITING = 64;

/**
 * While draining, how long a keep-alive connection with no request in flight is kept open before it
 * is closed. A request whose bytes have already arrived is read within it, answered (with
 * `Connection: close`) and its connection then closed; closing such a connection at once, as Node's
 * server.close() does, resets a request the client has sent.
 */
export const DRAIN_GRACE_MS = 1_000;

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

interface ConnectionState {
  active: number;
  waiting: [IncomingMessage, ServerResponse][];
  /** The request read last: while its body is still arriving, a close must linger. */
  latest?: IncomingMessage;
}

/**
 * Node's HTTP server, with pipelining bounded per connection and a shutdown in two steps:
 * stopAccepting() closes the listening socket and nothing else (every connection goes on as usual),
 * then drain() answers what arrives with `Connection: close` and closes idle connections after a grace
 * period. Under `--workers` the primary has every worker stop accepting before any drains: a worker
 * that answered `Connection: close` while another still accepted would send its clients to a socket
 * that is about to close, where their next request would be reset.
 */
export class GuardedServer extends Server {
  readonly #connections = new Map<Socket, ConnectionState>();
  #phase: 'serving' | 'not accepting' | 'draining' = 'serving';

  constructor(options: ServerOptions, handler: Handler) {
    super(options, (request, response) => this.#admit(request, response, handler));
    this.on('connection', (socket: Socket) => this.#track(socket));
  }

  /** Client connections open now (the metrics' petstore_http_connections). */
  get openConnections(): number {
    return this.#connections.size;
  }

  /** True once drain() has begun (or close() was called directly): answers say `Connection: close`. */
  get draining(): boolean {
    return this.#phase === 'draining';
  }

  /** Closes the listening socket; connections already accepted are served as usual. */
  stopAccepting(): void {
    if (this.#phase !== 'serving') return;
    this.#phase = 'not accepting';
    if (this.listening) this.close();
  }

  /**
   * Stops accepting if not yet, then drains; resolves once every connection has closed. Emits
   * 'draining' as it begins.
   */
  drain(): Promise<void> {
    const closed = new Promise<void>((resolve) => {
      if (!this.listening && this.#connections.size === 0) resolve();
      else this.once('close', () => resolve());
    });
    this.stopAccepting();
    const already = this.#phase === 'draining';
    this.#phase = 'draining';
    // Responses that never end by themselves (live event streams) end now, not at the drain's grace.
    if (!already) this.emit('draining');
    for (const socket of this.#connections.keys()) this.#closeWhenIdle(socket);
    return closed;
  }

  /**
   * Node's server.close() calls this and destroys every connection between two requests at once. Here
   * a direct close() drains instead (Fastify's close calls this too); after stopAccepting() it waits
   * for drain().
   */
  override closeIdleConnections(): void {
    if (this.#phase === 'serving') void this.drain();
  }

  #track(socket: Socket): void {
    const state: ConnectionState = { active: 0, waiting: [] };
    this.#connections.set(socket, state);
    socket.once('close', () => {
      this.#connections.delete(socket);
      state.waiting.length = 0; // the client is gone: nobody to answer
    });
    // Node resumes reading once its own write buffer drains; while requests wait here, it must not.
    socket.on('resume', () => {
      if (state.waiting.length > 0) socket.pause();
    });
    // Node ends a connection whose answer says `Connection: close` with destroySoon(), which drops it
    // the moment the answer is written. Answered before its body was read (a 413, a 415), the client
    // is still sending, and dropping it then resets the connection, the answer with it.
    const destroySoon = socket.destroySoon;
    socket.destroySoon = () => {
      if (state.latest && !state.latest.complete) closeLingering(socket);
      else destroySoon.call(socket);
    };
    if (this.draining) this.#closeWhenIdle(socket);
  }

  #admit(request: IncomingMessage, response: ServerResponse, handler: Handler): void {
    const socket = request.socket;
    const state = this.#connections.get(socket);
    if (state) state.latest = request;
    if (!state) {
      handler(request, response); // not a connection this server accepted
    } else if (state.active < MAX_PIPELINED) {
      this.#run(socket, state, request, response, handler);
    } else if (state.waiting.length < MAX_WAITING) {
      state.waiting.push([request, response]);
      socket.pause();
    } else {
      socket.destroy();
    }
  }

  #run(
    socket: Socket,
    state: ConnectionState,
    request: IncomingMessage,
    response: ServerResponse,
    handler: Handler,
  ): void {
    state.active++;
    // 'close' comes once: `on` spares the wrapper `once` would add to every request.
    response.on('close', () => {
      // An answer sent before its request's body was read to the end (a 415, a GET carrying a body, an
      // error mid-body): whatever was reading it stops, and the rest is read and thrown away, so the
      // next request on the connection is read. Node does this itself only for a body nobody read.
      if (!request.complete) {
        request.unpipe();
        request.resume();
      }
      state.active--;
      const next = state.waiting.shift();
      if (next) this.#run(socket, state, next[0], next[1], handler);
      else if (socket.isPaused()) socket.resume();
      if (this.draining && state.active === 0) this.#closeWhenIdle(socket);
    });
    handler(request, response);
  }

  #closeWhenIdle(socket: Socket): void {
    setTimeout(() => {
      const state = this.#connections.get(socket);
      if (state && state.active === 0 && state.waiting.length === 0) socket.destroy();
    }, DRAIN_GRACE_MS).unref();
  }
}
