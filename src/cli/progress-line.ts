/** How often a plain (non-terminal) progress line is written: enough to see life in a CI log, no flood. */
const PLAIN_INTERVAL_MS = 2_000;

/**
 * Progress of a long-running command. On a terminal, one line redrawn in place; anywhere else (a pipe,
 * a log file, CI) plain lines, at most one every couple of seconds plus the last, since a carriage
 * return there would only garble the log.
 */
import type { CliOutput } from './io.js';

export class ProgressLine {
  readonly #out: CliOutput;
  readonly #now: () => number;
  #lastPlainAt = Number.NEGATIVE_INFINITY;
  #lastPlainText: string | undefined;

  constructor(out: CliOutput = process.stderr, now: () => number = Date.now) {
    this.#out = out;
    this.#now = now;
  }

  /** Shows `text`; `done` ends the line, so what follows starts on a fresh one. */
  update(text: string, done = false): void {
    if (this.#out.isTTY) {
      // \r back to the start of the line, ESC[2K erase it, then redraw.
      this.#out.write(`\r\x1b[2K${text}${done ? '\n' : ''}`);
      return;
    }
    const now = this.#now();
    // A line already written stays as it is: writing the last figures again, as `done`, would repeat it.
    if (text === this.#lastPlainText || (!done && now - this.#lastPlainAt < PLAIN_INTERVAL_MS)) return;
    this.#lastPlainAt = now;
    this.#lastPlainText = text;
    this.#out.write(`${text}\n`);
  }
}
