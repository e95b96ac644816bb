import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy between the service and its database, for fault injection: it forwards, stalls (holds
 * every byte in both directions, connections left open, like a network that stopped delivering) or
 * cuts (resets every connection and every new one, like a server that went away), or delays every
 * answer (a server that is up but slow).
 */
export class TcpProxy {
  readonly #server: Server;
  readonly #pairs = new Set<[Socket, Socket]>();
  #mode: 'forward' | 'stall' | 'cut' = 'forward';
  #answerDelayMs = 0;

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(targetHost: string, targetPort: number): Promise<TcpProxy> {
    const server = createServer();
    const proxy = new TcpProxy(server);
    server.on('connection', (client) => proxy.#accept(client, targetHost, targetPort));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    const address = this.#server.address();
    if (typeof address !== 'object' || !address) throw new Error('not listening');
    return address.port;
  }

  /** `url` (a postgres:// URL) with its host and port replaced by this proxy's. */
  route(url: string): string {
    const routed = new URL(url);
    routed.hostname = '127.0.0.1';
    routed.port = String(this.port);
    return routed.href;
  }

  /** Holds every byte from now on, in both directions, on every connection, old and new. */
  stall(): void {
    this.#mode = 'stall';
    for (const [client, upstream] of this.#pairs) {
      client.pause();
      upstream.pause();
    }
  }

  /** Holds every byte from the target this long before passing it on (0: at once), on every connection. */
  delayAnswers(ms: number): void {
    this.#answerDelayMs = ms;
  }

  /** Resets every connection, and every new one until resume(). */
  cut(): void {
    this.#mode = 'cut';
    for (const [client, upstream] of this.#pairs) {
      client.resetAndDestroy();
      upstream.destroy();
    }
    this.#pairs.clear();
  }

  /** Forwards again; bytes held by a stall are delivered. */
  resume(): void {
    this.#mode = 'forward';
    for (const [client, upstream] of this.#pairs) {
      client.resume();
      upstream.resume();
    }
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  #accept(client: Socket, host: string, port: number): void {
    if (this.#mode === 'cut') {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(port, host);
    const pair: [Socket, Socket] = [client, upstream];
    this.#pairs.add(pair);
    const drop = () => {
      this.#pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (this.#answerDelayMs === 0) client.write(chunk);
      else setTimeout(() => client.writable && client.write(chunk), this.#answerDelayMs);
    });
    upstream.on('end', () => client.end());
    if (this.#mode === 'stall') {
      client.pause();
      upstream.pause();
    }
  }
}
