/**
 * A reader of Server-Sent Events as the HTML standard interprets an event stream (§9.2.6): UTF-8, a
 * leading BOM dropped, lines ended by CRLF, LF or CR (a CR at the end of one chunk and an LF at the
 * start of the next are one line end), `:` comments ignored, fields `event`, `data`, `id` (refused
 * when it holds NULL), `retry` (ASCII digits only), any other field ignored, a message dispatched at a
 * blank line when it has data, and a message left unfinished at the end of the stream discarded.
 *
 * The same file is src/cli/server-sent-events.ts in the service (`petstore listen`); a test keeps the
 * two equal, since neither package can import the other.
 */

/** One dispatched message. */
export interface ServerSentEvent {
  /** The `event` field, or `message` when it had none. */
  type: string;
  /** The `data` fields, joined with LF. */
  data: string;
  /** The last `id` field seen so far in the stream (the event's own, or an earlier one's). */
  lastEventId: string;
}

export interface ServerSentEventHandlers {
  event(message: ServerSentEvent): void;
  /** A `retry` field: how long to wait before reconnecting, in milliseconds. */
  retry?(milliseconds: number): void;
}

export class ServerSentEventParser {
  readonly #handlers: ServerSentEventHandlers;
  readonly #decoder = new TextDecoder('utf-8');
  #buffer = '';
  /** The previous chunk ended with CR: an LF starting this one ends no line of its own. */
  #afterCr = false;
  #data: string[] = [];
  #type = '';
  #lastEventId = '';

  constructor(handlers: ServerSentEventHandlers) {
    this.#handlers = handlers;
  }

  /** Takes the next bytes (or text) of the stream. */
  push(chunk: Uint8Array | string): void {
    let text = typeof chunk === 'string' ? chunk : this.#decoder.decode(chunk, { stream: true });
    if (this.#afterCr && text.startsWith('\n')) text = text.slice(1);
    if (text.length === 0) return;
    this.#afterCr = text.endsWith('\r');
    this.#buffer += text;
    const lines = this.#buffer.split(/\r\n|\r|\n/);
    this.#buffer = lines.pop() as string;
    for (const line of lines) this.#line(line);
  }

  #line(line: string): void {
    if (line === '') {
      this.#dispatch();
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.#type = value;
    else if (field === 'data') this.#data.push(value);
    else if (field === 'id') {
      if (!value.includes('\0')) this.#lastEventId = value;
    } else if (field === 'retry') {
      if (/^[0-9]+$/.test(value)) this.#handlers.retry?.(Number(value));
    }
  }

  #dispatch(): void {
    const data = this.#data;
    const type = this.#type;
    this.#data = [];
    this.#type = '';
    if (data.length === 0) return;
    this.#handlers.event({ type: type || 'message', data: data.join('\n'), lastEventId: this.#lastEventId });
  }
}
