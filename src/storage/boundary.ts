import type { Storage } from '../domain/storage.js';
import { wrapMethods } from './intercept-errors.js';

/** What the boundary does around every storage call; each part optional. */
export interface StorageBoundaryJobs {
  /** An error as the domain sees it (the adapter's translation, unavailable.ts); rethrown as returned. */
  translate?: (error: unknown) => unknown;
  /** Each failed call, once, with its error as translated and the operation's name (`pets.create`). */
  failed?: (operation: string, error: unknown) => void;
  /** Each call that did not fail. */
  succeeded?: () => void;
  /** Runs a call, e.g. within a span (tracing/storage-spans.ts); the call's result is handed on as is. */
  around?: <R>(operation: string, run: () => R) => R;
}

type Area = 'pets' | 'orders' | 'idempotency' | 'events' | 'webhookEndpoints' | 'deliveries';

/** An adapter's stores as they are before its translation of errors, and that translation. */
interface Untranslated {
  stores: Pick<Storage, Area>;
  translate: (error: unknown) => unknown;
}

const untranslated = new WeakMap<Storage, Untranslated>();

/**
 * Called by an adapter once its stores are made: `storage`'s own stores translate their errors (each
 * on its own, for every user: the command line, the probes, tests), and these are the same stores
 * before that translation, so the app's boundary can do it in its one pass instead of around it.
 */
export function offerUntranslated(
  storage: Storage,
  stores: Pick<Storage, Area>,
  translate: (error: unknown) => unknown,
): void {
  untranslated.set(storage, { stores, translate });
}

/**
 * One object per store, made once, whose every method does all of `jobs` in one pass: a call that
 * returns at once (SQLite's reads) still does, and one that returns a promise costs one `then` more,
 * not one per job. The app puts it around the storage it is given (metrics.ts: errors counted and
 * outages told; tracing: a span per call), so a store's call crosses one wrapper there, whatever is on:
 * when the adapter offered its stores before translation (offerUntranslated), the boundary wraps those
 * and translates too. (API keys stay behind their cache, which sits on the translated store.)
 */
export function storageBoundary(storage: Storage, jobs: StorageBoundaryJobs): Storage {
  const { failed, succeeded, around } = jobs;
  const offered = untranslated.get(storage);
  const guard = <T extends object>(given: T, area: string): T => {
    const inner = offered?.stores[area as Area] as T | undefined;
    const target = inner ?? given;
    const translate = inner ? offered?.translate : jobs.translate;
    return wrapMethods(target, (call, method) => {
      const operation = `${area}.${method}`;
      const fail = (error: unknown): never => {
        const seen = translate ? translate(error) : error;
        failed?.(operation, seen);
        throw seen;
      };
      const settled = succeeded
        ? (value: unknown) => {
            succeeded();
            return value;
          }
        : undefined;
      // Not an async function: that would add a promise and two turns to every storage call.
      const run = (args: unknown[]): unknown => {
        try {
          const result = call(args);
          if (!(result instanceof Promise)) {
            succeeded?.();
            return result;
          }
          return settled ? result.then(settled, fail) : result.catch(fail);
        } catch (error) {
          return fail(error);
        }
      };
      return around ? (...args) => around(operation, () => run(args)) : (...args) => run(args);
    });
  };
  return {
    pets: guard(storage.pets, 'pets'),
    orders: guard(storage.orders, 'orders'),
    apiKeys: guard(storage.apiKeys, 'apiKeys'),
    idempotency: guard(storage.idempotency, 'idempotency'),
    events: guard(storage.events, 'events'),
    webhookEndpoints: guard(storage.webhookEndpoints, 'webhookEndpoints'),
    deliveries: guard(storage.deliveries, 'deliveries'),
    schema: storage.schema,
    sharedSecret: (name) => storage.sharedSecret(name),
    ping: () => storage.ping(),
    analyze: () => storage.analyze(),
    close: () => storage.close(),
  };
}
