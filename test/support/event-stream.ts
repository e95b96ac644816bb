import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { type ClientRequest, type IncomingHttpHeaders, request } from 'node:http';
import { type ServerSentEvent, ServerSentEventParser } from '../../packages/client/src/server-sent-events.js';
import { poll } from './cli.js';
import { TEST_KEY } from './test-server.js';

export interface StreamOptions {
  /** The bearer key; TEST_KEY by default. */
  key?: string;
  headers?: Record<string, string>;
}

/**
 * A live event stream as a test reads it: a real connection (node:http, no pooling), every message
 * parsed by the HTML standard's rules (the client's reader, tested against the standard's examples),
 * the raw text kept too. An answer other than a stream is kept as `status` and `body`.
 */
export class TestStream {
  readonly messages: ServerSentEvent[] = [];
  /** When each message arrived (performance.now()). */
  readonly arrivals: number[] = [];
  readonly retries: number[] = [];
  raw = '';
  status = 0;
  headers: IncomingHttpHeaders = {};
  /** Resolves when the response ends ('end') or the connection breaks ('error'). */
  readonly ended: Promise<'end' | 'error'>;
  readonly #request: ClientRequest;
  #settle: (how: 'end' | 'error') => void = () => undefined;

  private constructor(url: string, { key = TEST_KEY, headers = {} }: StreamOptions) {
    this.ended = new Promise((resolve) => {
      this.#settle = resolve;
    });
    const parser = new ServerSentEventParser({
      event: (message) => {
        this.messages.push(message);
        this.arrivals.push(performance.now());
      },
      retry: (ms) => this.retries.push(ms),
    });
    this.#request = request(url, {
      agent: false,
      headers: { accept: 'text/event-stream', authorization: `Bearer ${key}`, ...headers },
    });
    this.#request.on('error', () => this.#settle('error'));
    this.#request.on('response', (res) => {
      this.status = res.statusCode ?? 0;
      this.headers = res.headers;
      res.on('data', (chunk: Buffer) => {
        this.raw += chunk.toString();
        if (this.status === 200) parser.push(chunk);
      });
      res.on('end', () => this.#settle('end'));
      res.on('error', () => this.#settle('error'));
      res.on('close', () => this.#settle(res.complete ? 'end' : 'error'));
    });
    this.#request.end();
  }

  /** Opens `url` (…/v1/events?…) and resolves once the answer's head has arrived. */
  static async open(url: string, options: StreamOptions = {}): Promise<TestStream> {
    const stream = new TestStream(url, options);
    await poll(`the answer of ${url}`, () => (stream.status > 0 ? true : undefined));
    return stream;
  }

  /** The body, for an answer that is not a stream (an Error), once it has ended. */
  async body(): Promise<string> {
    await this.ended;
    return this.raw;
  }

  /** Waits until `count` messages have arrived (fails, naming them, if they never do). */
  async waitFor(count: number): Promise<ServerSentEvent[]> {
    return poll(`${count} messages (have ${this.messages.length})`, () =>
      this.messages.length >= count ? this.messages.slice(0, count) : undefined,
    );
  }

  /** The ids received, as numbers. */
  ids(): number[] {
    return this.messages.map((message) => Number(message.lastEventId));
  }

  /** The last id received, as Last-Event-ID carries it. */
  lastId(): string | undefined {
    return this.messages[this.messages.length - 1]?.lastEventId;
  }

  /** The client side's port: which connection of the server's this stream is. */
  get localPort(): number | undefined {
    return this.#request.socket?.localPort;
  }

  close(): void {
    this.#request.destroy();
  }
}

/**
 * Which of `pids` holds the server side of the connection from 127.0.0.1:`clientPort` (Linux: the
 * socket's inode in /proc/net/tcp, then the process with a descriptor on it), or undefined.
 */
export function processHolding(clientPort: number, pids: readonly number[]): number | undefined {
  const hex = clientPort.toString(16).toUpperCase().padStart(4, '0');
  const inodes = readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields[2] === `0100007F:${hex}`)
    .map((fields) => `socket:[${fields[9]}]`);
  return pids.find((pid) => {
    try {
      return readdirSync(`/proc/${pid}/fd`).some((fd) => {
        try {
          return inodes.includes(readlinkSync(`/proc/${pid}/fd/${fd}`));
        } catch {
          return false;
        }
      });
    } catch {
      return false;
    }
  });
}
