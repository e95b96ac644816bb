import { Worker } from 'node:worker_threads';
import type { DelivererLog, DelivererMetrics } from './attempt.js';

/** What the thread is started with: the configuration's variables, from which it loads its own. */
export interface DeliveryThreadData {
  variables: Readonly<Record<string, string>>;
}

/** What the thread counted since its last message: each attempt's outcome and seconds, each disabling, each 2xx's lag. */
export interface MetricsBatch {
  attempted: [Parameters<DelivererMetrics['attempted']>[0], number][];
  disabled: string[];
  delivered: number[];
}

export type FromDeliveryThread = { type: 'started' } | { type: 'metrics'; batch: MetricsBatch };
export type ToDeliveryThread = { type: 'stop'; graceMs: number };

/** After the grace, how long a stopping thread has to give its leases back and close before it is ended. */
const STOP_MARGIN_MS = 5_000;
/** A thread that died is started again after this long; if it cannot start, twice as late each time, up to MAX_RESTART_MS. */
const RESTART_MS = 1_000;
const MAX_RESTART_MS = 30_000;

/**
 * A `--role all` process's deliveries, on a thread of their own (serve-deliveries.ts): the API's
 * event loop and the deliveries' never wait on each other. Started with the node, stopped with it
 * (giving back its leases as a `--role deliver` process does); one that dies is logged and started again,
 * and tried again, less and less often, while it cannot start (its database down, say).
 */
export class DeliveryThread {
  readonly #data: DeliveryThreadData;
  readonly #metrics: DelivererMetrics;
  readonly #log: DelivererLog & { error(object: object, message: string): void };
  readonly #entry: URL;
  #worker: { worker: Worker; exited: Promise<number> } | undefined;
  #stopping = false;
  /** Starts in a row that failed: each waits twice as long as the one before (#restartLater). */
  #failedStarts = 0;

  constructor(
    data: DeliveryThreadData,
    metrics: DelivererMetrics,
    log: DelivererLog & { error(object: object, message: string): void },
    /** The thread's code: delivery-thread-main.ts (a test gives one that ends, to see it started again). */
    entry = new URL('./delivery-thread-main.js', import.meta.url),
  ) {
    this.#entry = entry;
    this.#data = data;
    this.#metrics = metrics;
    this.#log = log;
  }

  /** Resolves once the thread has opened its database and delivers; rejects if it could not. */
  start(): Promise<void> {
    const worker = new Worker(this.#entry, { workerData: this.#data });
    // Taken now, so a stop that comes after the thread has ended (one that could not start again) has
    // its exit to wait for: the event is not emitted twice.
    const exited = new Promise<number>((resolve) => worker.once('exit', resolve));
    this.#worker = { worker, exited };
    worker.on('message', (message: FromDeliveryThread) => {
      if (message.type === 'metrics') this.#count(message.batch);
    });
    return new Promise((resolve, reject) => {
      const started = (message: FromDeliveryThread) => {
        if (message.type !== 'started') return;
        worker.off('message', started);
        worker.off('error', failed);
        void exited.then((code) => this.#exited(worker, code));
        worker.on('error', (error) => this.#log.error({ err: error }, 'the delivery thread failed'));
        this.#failedStarts = 0;
        resolve();
      };
      const failed = (error: Error) => reject(error);
      worker.on('message', started);
      worker.once('error', failed);
      // Ended before it said so, without an error: refused all the same (a no-op once settled).
      void exited.then((code) =>
        reject(new Error(`the delivery thread ended (code ${code}) before it started`)),
      );
    });
  }

  /** Takes no new attempt; those under way get `graceMs`, then their leases are given back. */
  async stop(graceMs: number): Promise<void> {
    this.#stopping = true;
    if (!this.#worker) return;
    const { worker, exited } = this.#worker;
    worker.postMessage({ type: 'stop', graceMs } satisfies ToDeliveryThread);
    const late = setTimeout(() => void worker.terminate(), graceMs + STOP_MARGIN_MS);
    await exited;
    clearTimeout(late);
  }

  #exited(worker: Worker, code: number): void {
    if (this.#stopping || worker !== this.#worker?.worker) return;
    this.#log.error({ code }, 'the delivery thread ended: starting it again');
    this.#restartLater();
  }

  /** Starts the thread again after RESTART_MS, and again, twice as late each time, while it cannot start. */
  #restartLater(): void {
    const delay = Math.min(RESTART_MS * 2 ** this.#failedStarts, MAX_RESTART_MS);
    setTimeout(() => {
      if (this.#stopping) return;
      this.start().catch((error: unknown) => {
        this.#failedStarts += 1;
        this.#log.error({ err: error }, 'the delivery thread could not start again: trying again later');
        this.#restartLater();
      });
    }, delay).unref();
  }

  #count({ attempted, disabled, delivered }: MetricsBatch): void {
    for (const [outcome, seconds] of attempted) this.#metrics.attempted(outcome, seconds);
    for (const reason of disabled) this.#metrics.disabled(reason);
    for (const lag of delivered) this.#metrics.delivered(lag);
  }
}
