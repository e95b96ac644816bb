import type { ApiKeyStore, ApiKeyUse } from './storage.js';

/** docs/api.md: last use is kept coarse, at most one write per key per minute (per process). */
export const LAST_USE_FLUSH_MS = 60_000;

/**
 * When each key was last used, remembered in this process and written in the background. A request
 * only sets a map entry (`used`, synchronous, no I/O), so a read costs what it did before; `flush`
 * writes every key used since the last flush in one statement. Flushed every LAST_USE_FLUSH_MS, each
 * key is written at most once per flush, so at most once a minute. A failed write is retried with the
 * next flush (unless a later use took its place); it never fails a request.
 */
export class ApiKeyLastUse {
  readonly #store: Pick<ApiKeyStore, 'recordLastUse'>;
  /** The latest use of each key since the last flush, by hash. */
  #pending = new Map<string, Date>();
  #flushing: Promise<void> | undefined;

  constructor(store: Pick<ApiKeyStore, 'recordLastUse'>) {
    this.#store = store;
  }

  /** The key with this hash was used at `at`. */
  used(hash: string, at: Date): void {
    this.#pending.set(hash, at);
  }

  /** Keys used since the last flush. */
  get pending(): number {
    return this.#pending.size;
  }

  /** Writes the uses remembered so far; one flush at a time, a second call waits for the first. */
  async flush(): Promise<void> {
    while (this.#flushing) await this.#flushing;
    if (this.#pending.size === 0) return;
    const taken = this.#pending;
    this.#pending = new Map();
    const uses: ApiKeyUse[] = [...taken].map(([hash, at]) => ({ hash, at }));
    this.#flushing = this.#store.recordLastUse(uses).then(
      () => undefined,
      (error: unknown) => {
        // Put back what no later use replaced; the next flush tries again.
        for (const [hash, at] of taken) if (!this.#pending.has(hash)) this.#pending.set(hash, at);
        throw error;
      },
    );
    try {
      await this.#flushing;
    } finally {
      this.#flushing = undefined;
    }
  }
}
