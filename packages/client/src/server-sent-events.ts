/**
 * A reader of Server-Sent Events as the HTML standard interprets an event stream (§9.2.6), parsed by
 * the npm package eventsource-parser (UTF-8 decoded here, a leading BOM dropped, CRLF, LF or CR line
 * ends, comments and unknown fields ignored, an `id` holding NULL refused, `retry` as ASCII digits
 * only, a message dispatched at a blank line when it has data, an unfinished one at the end discarded).
 * bench/sse-parsers.ts measured it at about half the CPU of the reader written here before it.
 *
 * What this file adds: a stream is read as something that may be broken or hostile: a line or a
 * message's data longer than MAX_MESSAGE_CHARS throws (the reader reconnects), a `retry` is taken
 * within MIN_RETRY_MS and MAX_RETRY_MS, and the last event id is kept from message to message, as the
 * standard's last event ID buffer (eventsource-parser gives each message only its own `id`).
 */
import { createParser, type EventSourceParser } from 'eventsource-parser';

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
  readonly #decoder = new TextDecoder('utf-8');
  readonly #parser: EventSourceParser;
  /** Characters after the last line end fed so far: the line being read, bounded by MAX_MESSAGE_CHARS. */
  #lineChars = 0;
  #lastEventId = '';

  constructor(handlers: ServerSentEventHandlers) {
    this.#parser = createParser({
      // The line and the message's data held together past the bound: the line is bounded on its own
      // before each feed, so here it is the data.
      maxBufferSize: MAX_MESSAGE_CHARS,
      onError: (error) => {
        if (error.type === 'max-buffer-size-exceeded') throw tooLong("a message's data");
      },
      onId: (id) => {
        this.#lastEventId = id;
      },
      onEvent: ({ event, data }) =>
        handlers.event({ type: event || 'message', data, lastEventId: this.#lastEventId }),
      onRetry: (ms) => handlers.retry?.(Math.min(MAX_RETRY_MS, Math.max(MIN_RETRY_MS, ms))),
    });
  }

  /** Takes the next bytes (or text) of the stream. */
  push(chunk: Uint8Array | string): void {
    const text = typeof chunk === 'string' ? chunk : this.#decoder.decode(chunk, { stream: true });
    const lineEnd = Math.max(text.lastIndexOf('\n'), text.lastIndexOf('\r'));
    this.#lineChars = lineEnd < 0 ? this.#lineChars + text.length : text.length - lineEnd - 1;
    // Refused before it is fed: eventsource-parser holds no line it would ignore, but bounds none.
    if (this.#lineChars > MAX_MESSAGE_CHARS) throw tooLong('a line');
    this.#parser.feed(text);
  }

  /** The last `id` field seen so far (an `after=now` stream's first message sets it without data). */
  get lastEventId(): string {
    return this.#lastEventId;
  }
}

function tooLong(what: string): Error {
  return new Error(
    `${what} of the event stream is longer than ${MAX_MESSAGE_CHARS} characters: not read further`,
  );
}
