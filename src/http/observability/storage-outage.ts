import type { FastifyBaseLogger } from 'fastify';

/** While the database stays away, a reminder this often, with the count so far. */
const REMINDER_INTERVAL_MS = 60_000;

/**
 * Logs a database outage once, not once per refused request: a line when the first call fails as
 * unavailable, a reminder with the count every minute while it lasts, and a line with the count and
 * the duration when a call succeeds again.
 */
export class StorageOutage {
  readonly #log: FastifyBaseLogger;
  readonly #now: () => number;
  #since: number | undefined;
  #lastLogged = 0;
  #failures = 0;

  constructor(log: FastifyBaseLogger, now: () => number = Date.now) {
    this.#log = log;
    this.#now = now;
  }

  get active(): boolean {
    return this.#since !== undefined;
  }

  failed(error: Error): void {
    const now = this.#now();
    this.#failures++;
    if (this.#since === undefined) {
      this.#since = now;
      this.#lastLogged = now;
      this.#log.error(
        { reason: error.message },
        'database unavailable: requests that need it are answered 503 until it is back',
      );
    } else if (now - this.#lastLogged >= REMINDER_INTERVAL_MS) {
      this.#lastLogged = now;
      this.#log.error(
        { reason: error.message, failures: this.#failures, seconds: Math.round((now - this.#since) / 1000) },
        'database still unavailable',
      );
    }
  }

  recovered(): void {
    if (this.#since === undefined) return;
    this.#log.warn(
      { failures: this.#failures, seconds: Math.round((this.#now() - this.#since) / 1000) },
      'database available again',
    );
    this.#since = undefined;
    this.#failures = 0;
  }
}
