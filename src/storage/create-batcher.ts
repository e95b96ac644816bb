/**
 * Group commit for creates. A durable commit costs one fsync (SQLite with synchronous=FULL, PostgreSQL
 * with synchronous_commit=on) whether it holds one row or a hundred, so committing each request alone
 * caps creates at the disk's flush rate. This single writer batches whatever arrived while the previous
 * commit was being written (or, when idle, during the current event-loop turn) and commits it as one
 * transaction; each caller's promise settles only once its own batch has committed, so a 201 still means
 * "on disk". The benchmark's `create` scenario measured the difference (docs/benchmarks.md).
 */
import { AsyncResource } from 'node:async_hooks';

export type CommitBatch<T, R> = (items: readonly T[]) => Promise<readonly R[]> | readonly R[];

interface Pending<T, R> {
  item: T;
  resolve(result: R): void;
  reject(error: unknown): void;
  /** Whose request it is part of (GroupCommitObserver.caller), when commits are observed. */
  caller: unknown;
}

/** Sees every group commit, when tracing is on (tracing/storage-spans.ts); nothing is asked otherwise. */
export interface GroupCommitObserver {
  /** What the caller of add() is part of (its trace), read in the caller's own context. */
  caller(): unknown;
  /** Runs one commit of the writes of these callers, in arrival order. */
  commit<R>(name: string, callers: readonly unknown[], run: () => R): R;
}

let observer: GroupCommitObserver | undefined;

/** From now on every group commit of this process is shown to `observing` (tracing does it at start). */
export function observeGroupCommits(observing: GroupCommitObserver): void {
  observer = observing;
}

/** Largest batch in one transaction: bounds one commit's latency and a PostgreSQL statement's size. */
export const MAX_BATCH_SIZE = 512;

export class CreateBatcher<T, R> {
  readonly #commit: CommitBatch<T, R>;
  readonly #maxBatchSize: number;
  /** What its commits write, e.g. pets.create, for whoever observes them. */
  readonly #name: string;
  #queue: Pending<T, R>[] = [];
  /** True from the moment a flush is scheduled until the queue is empty again. */
  #busy = false;
  #idle: (() => void)[] = [];

  /**
   * How long a batch waits for more once its first item arrived (0: until the event-loop turn ends); and,
   * when more than 0, the least time from one commit's start to the next's, so a steady stream of items
   * is committed a linger's worth at a time rather than each few as the last commit ends.
   */
  readonly #lingerMs: number;
  /** Run in each caller's own context once its batch committed, before its add() resolves. */
  readonly #afterCommit: (() => Promise<void>) | undefined;
  /**
   * Where commits run: the batcher's own context, never one caller's (a batch is on no single caller's
   * behalf; what is done for each caller is done in its own context, afterCommit).
   */
  readonly #context = new AsyncResource('CreateBatcher');

  constructor(
    commit: CommitBatch<T, R>,
    {
      name = 'writes',
      maxBatchSize = MAX_BATCH_SIZE,
      lingerMs = 0,
      afterCommit,
    }: {
      name?: string;
      maxBatchSize?: number;
      lingerMs?: number;
      afterCommit?: (() => Promise<void>) | undefined;
    } = {},
  ) {
    this.#commit = commit;
    this.#maxBatchSize = maxBatchSize;
    this.#name = name;
    this.#lingerMs = lingerMs;
    this.#afterCommit = afterCommit;
  }

  /** Resolves to the committed result for `item` once the transaction holding it has committed. */
  add(item: T): Promise<R> {
    const committed = new Promise<R>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject, caller: observer?.caller() });
      if (!this.#busy) {
        this.#busy = true;
        // setImmediate, not a microtask: every request whose bytes arrived in this event-loop turn is
        // parsed and queued before the first commit, so they share its fsync.
        this.#context.runInAsyncScope(() => {
          if (this.#lingerMs > 0) setTimeout(() => void this.#flush(), this.#lingerMs);
          else setImmediate(() => void this.#flush());
        });
      }
    });
    const after = this.#afterCommit;
    // A then callback runs in the context it was added in: this caller's.
    if (!after) return committed;
    return committed.then(async (result) => {
      await after();
      return result;
    });
  }

  /** Resolves once nothing is queued or being committed (before closing the database). */
  settled(): Promise<void> {
    if (!this.#busy) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  async #flush(): Promise<void> {
    while (this.#queue.length > 0) {
      const started = performance.now();
      const batch = this.#queue.splice(0, this.#maxBatchSize);
      try {
        const commit = () => this.#commit(batch.map((pending) => pending.item));
        const results = await (observer
          ? observer.commit(
              this.#name,
              batch.map((pending) => pending.caller),
              commit,
            )
          : commit());
        if (results.length !== batch.length) {
          throw new Error(`a batch of ${batch.length} creates committed ${results.length} rows`);
        }
        for (const [i, pending] of batch.entries()) pending.resolve(results[i] as R);
      } catch (error) {
        // The transaction rolled back as a whole: exactly its callers fail, later batches still run.
        for (const pending of batch) pending.reject(error);
      }
      const left = this.#lingerMs - (performance.now() - started);
      if (left > 0 && this.#queue.length > 0 && this.#queue.length < this.#maxBatchSize)
        await new Promise((resolve) => setTimeout(resolve, left));
    }
    this.#busy = false;
    for (const resolve of this.#idle.splice(0)) resolve();
  }
}
