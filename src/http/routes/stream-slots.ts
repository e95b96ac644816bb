import cluster, { type Worker } from 'node:cluster';

/**
 * The live streams each API key holds on a node (EVENT_STREAM_MAX_PER_KEY), counted for the node as a
 * whole: under `serve --workers`, the primary counts for every worker, so a key holds at most the bound
 * on the node however the kernel spreads its connections (counted per process, one key held 20 streams
 * on a node of two workers).
 */
export interface StreamSlots {
  /** Takes one of `key`'s slots; false when it holds them all. */
  take(key: string): boolean | Promise<boolean>;
  /** Gives back one slot `take` granted. */
  give(key: string): void;
}

/** Slots counted in this process: a node of one process, and the primary's count for its workers. */
export class LocalStreamSlots implements StreamSlots {
  readonly #held = new Map<string, number>();

  constructor(readonly max: number) {}

  take(key: string): boolean {
    const count = this.#held.get(key) ?? 0;
    if (count >= this.max) return false;
    this.#held.set(key, count + 1);
    return true;
  }

  give(key: string): void {
    const left = (this.#held.get(key) ?? 1) - 1;
    if (left > 0) this.#held.set(key, left);
    else this.#held.delete(key);
  }
}

const TAKE = 'petstore:stream-slot-take';
const GIVEN = 'petstore:stream-slot-given';
const GIVE = 'petstore:stream-slot-give';

interface SlotMessage {
  type?: unknown;
  id?: number;
  key?: string;
  granted?: boolean;
}

/** A worker's slots: asked of the primary (StreamSlotBroker), one message each way per stream opened. */
export class WorkerStreamSlots implements StreamSlots {
  readonly #waiting = new Map<number, (granted: boolean) => void>();
  readonly #local: LocalStreamSlots;
  #next = 0;

  constructor(max: number) {
    this.#local = new LocalStreamSlots(max);
    process.on('message', (message: SlotMessage) => {
      if (message?.type !== GIVEN || message.id === undefined) return;
      this.#waiting.get(message.id)?.(message.granted === true);
      this.#waiting.delete(message.id);
    });
  }

  take(key: string): boolean | Promise<boolean> {
    // Cut off from the primary (it is going away): the process counts for itself.
    if (!process.connected || !process.send) return this.#local.take(key);
    const id = this.#next++;
    return new Promise((resolve) => {
      this.#waiting.set(id, resolve);
      process.send?.({ type: TAKE, id, key });
    });
  }

  give(key: string): void {
    if (process.connected) process.send?.({ type: GIVE, key });
    else this.#local.give(key);
  }
}

/** The primary's side: one count for the node, and what each worker holds, given back when it exits. */
export class StreamSlotBroker {
  readonly #node: LocalStreamSlots;
  readonly #byWorker = new Map<Worker, Map<string, number>>();

  constructor(max: number) {
    this.#node = new LocalStreamSlots(max);
  }

  /** Answers `worker`'s message if it is about slots; true when it was. */
  handle(worker: Worker, message: SlotMessage): boolean {
    if (typeof message?.key !== 'string') return false;
    const held = this.#byWorker.get(worker) ?? new Map<string, number>();
    this.#byWorker.set(worker, held);
    if (message.type === TAKE) {
      const granted = this.#node.take(message.key);
      if (granted) held.set(message.key, (held.get(message.key) ?? 0) + 1);
      if (worker.isConnected()) worker.send({ type: GIVEN, id: message.id, granted });
      return true;
    }
    if (message.type === GIVE && (held.get(message.key) ?? 0) > 0) {
      held.set(message.key, (held.get(message.key) ?? 1) - 1);
      this.#node.give(message.key);
      return true;
    }
    return false;
  }

  /** A worker exited: its streams are gone, and their slots with them. */
  retired(worker: Worker): void {
    for (const [key, count] of this.#byWorker.get(worker) ?? [])
      for (let n = 0; n < count; n++) this.#node.give(key);
    this.#byWorker.delete(worker);
  }
}

/** The slots of this process: the primary's count under `--workers`, else its own. */
export function streamSlots(max: number): StreamSlots {
  return cluster.isWorker ? new WorkerStreamSlots(max) : new LocalStreamSlots(max);
}
