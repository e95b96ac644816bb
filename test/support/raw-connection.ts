import { connect, type Socket } from 'node:net';
import { parseRawResponse, type RawHttpResponse } from './raw-http.js';

/**
 * A keep-alive connection read response by response. `next()` resolves with the next complete
 * response, or with 'closed' when the server closed the connection before sending one.
 */
export class RawConnection {
  readonly #socket: Socket;
  #buffer = Buffer.alloc(0);
  #closed = false;
  #wake: (() => void) | undefined;

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk]);
      this.#wake?.();
    });
    socket.on('close', () => {
      this.#closed = true;
      this.#wake?.();
    });
    socket.on('error', () => {});
  }

  static open(url: URL): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () => resolve(new RawConnection(socket)));
      socket.once('error', reject);
    });
  }

  /** Writes and waits until the bytes are handed to the kernel (the server may stop reading them). */
  write(data: Buffer | string): void {
    if (!this.#closed) this.#socket.write(data);
  }

  /** The next response (a HEAD's has no body), or 'closed'; rejects after `boundMs`. */
  async next(boundMs: number, head = false): Promise<RawHttpResponse | 'closed'> {
    const deadline = Date.now() + boundMs;
    for (;;) {
      const response = this.#take(head);
      if (response) return response;
      if (this.#closed) return 'closed';
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no answer within ${boundMs} ms on a connection that stayed open`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  #take(head: boolean) {
    const end = this.#buffer.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
    const length = head
      ? 0
      : Number(
          /\r\ncontent-length: *(\d+)/i.exec(this.#buffer.subarray(0, end).toString('latin1'))?.[1] ?? 0,
        );
    if (this.#buffer.length < end + 4 + length) return undefined;
    const response = parseRawResponse(this.#buffer.subarray(0, end + 4 + length));
    this.#buffer = this.#buffer.subarray(end + 4 + length);
    return response;
  }

  close(): void {
    this.#socket.destroy();
  }
}
