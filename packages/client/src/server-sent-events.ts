/**
 * A reader of Server-Sent Events as the HTML standard interprets an event stream (§9.2.6): UTF-8, a
 * leading BOM dropped, lines ended by CRLF, LF or CR (a CR at the end of one chunk and an LF at the
 * start of the next are one line end), `:` comments ignored, fields `event`, `data`, `id` (refused
 * when it holds NULL), `retry` (ASCII digits only), any other field ignored, a message dispatched at a
 * blank line when it has data, and a message left unfinished at the end of the stream discarded.
 *
 * A stream is read as something that may be broken or hostile: a line or a message's data longer than
 * MAX_MESSAGE_CHARS throws (the reader reconnects), and a `retry` is taken within MIN_RETRY_MS and
 * MAX_RETRY_MS.
 *
 * The same file is src/cli/server-sent-events.ts in the service (`petstore listen`); a test keeps the
 * two equal, since neither package can import the other.
 */

/** The longest line, and the most data in one message, a reader holds: a MiB of text. */
export const MAX_MESSAGE_CHARS = 1024 * 1024;
/** A `retry` is taken within these bounds: `retry: 0` would make a reader reconnect in a tight loop. */
export const MIN_RETRY_MS = 500;
export const MAX_RETRY_MS = 60_000;

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
  /** Characters in #data, bounded by MAX_MESSAGE_CHARS. */
  #dataChars = 0;
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
    // Split only when a line ended: splitting the whole buffer again at every chunk of a line that never
    // ends costs time in the square of its length.
    if (!/[\r\n]/.test(text)) {
      if (this.#buffer.length > MAX_MESSAGE_CHARS) throw tooLong('a line');
      return;
    }
    const lines = this.#buffer.split(/\r\n|\r|\n/);
    this.#buffer = lines.pop() as string;
    if (this.#buffer.length > MAX_MESSAGE_CHARS) throw tooLong('a line');
    for (const line of lines) this.#line(line);
  }

  /** The last `id` field seen so far (an `after=now` stream's first message sets it without data). */
  get lastEventId(): string {
    return this.#lastEventId;
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
    else if (field === 'data') {
      this.#dataChars += value.length + 1;
      if (this.#dataChars > MAX_MESSAGE_CHARS) throw tooLong("a message's data");
      this.#data.push(value);
    } else if (field === 'id') {
      if (!value.includes('\0')) this.#lastEventId = value;
    } else if (field === 'retry') {
      if (/^[0-9]+$/.test(value))
        this.#handlers.retry?.(Math.min(MAX_RETRY_MS, Math.max(MIN_RETRY_MS, Number(value))));
    }
  }

  #dispatch(): void {
    const data = this.#data;
    const type = this.#type;
    this.#data = [];
    this.#dataChars = 0;
    this.#type = '';
    if (data.length === 0) return;
    this.#handlers.event({ type: type || 'message', data: data.join('\n'), lastEventId: this.#lastEventId });
  }
}

function tooLong(what: string): Error {
  return new Error(
    `${what} of the event stream is longer than ${MAX_MESSAGE_CHARS} characters: not read further`,
  );
}
