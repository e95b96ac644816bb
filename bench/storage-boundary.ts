/**
 * What the wrappers around a storage call cost: `npm run bench -- storage-boundary [--calls 1000000]
 * [--rounds 5]`. A store whose method answers at once (a resolved promise, as a cached read does; and a
 * plain value, as SQLite's reads do) is called through:
 * - `bare`: nothing;
 * - `layers`: the four wrappers the service put around each call before this file's first version,
 *   one after the other, as app.ts and the PostgreSQL adapter composed them: the adapter's translation
 *   of its driver's errors (translateUnavailable), the replicas' recording of writes (recordingWrites, a
 *   pass-through for a read), the app's counting of errors and outages (metrics.instrument), and
 *   tracing's span per call (tracing.storage.instrument), made here from the same primitives;
 * - `split`: the adapter's translation, then the app's boundary counting and tracing in one pass;
 * - `now`: what a call of the app crosses today: one boundary (storage/boundary.ts) over the adapter's
 *   stores before translation (offerUntranslated), translating, counting and tracing in one pass. Writes
 *   are recorded for read-your-writes by the pool they write through (transaction.ts), not a wrapper.
 * Tracing is on but the caller is in no sampled trace (every background call, and most requests).
 * Each round runs every variant in turn; the median nanoseconds per call over the rounds, and the
 * ratios, printed as one JSON line. A measurement, not a test: nothing is asserted.
 *
 * On 2 shared cores, Node.js 20, 1,000,000 calls, 5 rounds (two runs): a promise-returning call took
 * 41 to 43 ns bare, 171 through the four layers, 157 split, 121 to 124 now (layers / now 1.39 to 1.41);
 * a plain value 3 ns bare, 67 through the layers, 55 to 56 split, 47 to 49 now (1.36 to 1.43). What the
 * wrappers add to a call falls from 130 to 81 ns (64 to 44 for a plain value), against a database
 * round trip of 50 µs and more: a newcomer's one place to read, rather than a saving anyone measures
 * on a request.
 */
import { parseArgs } from 'node:util';
import { trace } from '@opentelemetry/api';
import { StorageUnavailableError } from '../src/domain/errors.js';
import type { Storage } from '../src/domain/storage.js';
import { offerUntranslated, storageBoundary } from '../src/storage/boundary.js';
import { interceptErrors, wrapMethods } from '../src/storage/intercept-errors.js';
import { toStorageError, translateUnavailable } from '../src/storage/unavailable.js';
import { StorageSpans } from '../src/tracing/storage-spans.js';
import { median } from './rounds.js';

const { values: args } = parseArgs({
  options: { calls: { type: 'string', default: '1000000' }, rounds: { type: 'string', default: '5' } },
});
const CALLS = Number(args.calls);
const ROUNDS = Number(args.rounds);

class Pets {
  async findById(id: number): Promise<number> {
    return id;
  }
  findJsonById(id: number): number {
    return id;
  }
}

const isUnavailable = (error: unknown) => (error as { code?: string }).code === 'ECONNREFUSED';
const spans = new StorageSpans(trace.getTracer('bench'), 'postgresql');
let errors = 0;
let outage = false;
const counted = {
  failed: (_operation: string, error: unknown) => {
    errors++;
    if (error instanceof StorageUnavailableError) outage = true;
  },
  succeeded: () => {
    if (outage) outage = false;
  },
};
const storageOf = (pets: object) =>
  ({ pets, orders: {}, apiKeys: {}, idempotency: {}, events: {}, webhooks: {} }) as unknown as Storage;

type Variant = { findById(id: number): unknown; findJsonById(id: number): unknown };
const variants: Record<string, Variant> = {
  bare: new Pets(),
  layers: (() => {
    const translated = translateUnavailable(new Pets(), isUnavailable);
    const recording = wrapMethods(
      translated,
      (call) =>
        (...a) =>
          call(a),
    );
    const metered = interceptErrors(
      recording,
      (error, method) => {
        counted.failed(`pets.${method}`, error);
        throw error;
      },
      counted.succeeded,
    );
    return wrapMethods(
      metered,
      (call, method) =>
        (...a) =>
          spans.around(`pets.${method}`, () => call(a)),
    );
  })(),
  split: storageBoundary(storageOf(translateUnavailable(new Pets(), isUnavailable)), {
    ...counted,
    around: (operation, run) => spans.around(operation, run),
  }).pets as unknown as Variant,
  now: (() => {
    const pets = new Pets();
    const storage = storageOf(translateUnavailable(pets, isUnavailable));
    offerUntranslated(storage, storageOf(pets), (error) => toStorageError(error, isUnavailable));
    return storageBoundary(storage, {
      ...counted,
      around: (operation, run) => spans.around(operation, run),
    }).pets as unknown as Variant;
  })(),
};

async function timeAsync(pets: Variant): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < CALLS; i++) await pets.findById(i);
  return Number(process.hrtime.bigint() - start) / CALLS;
}

function timeSync(pets: Variant): number {
  const start = process.hrtime.bigint();
  let sum = 0;
  for (let i = 0; i < CALLS; i++) sum += pets.findJsonById(i) as number;
  if (sum < 0) throw new Error('unreachable');
  return Number(process.hrtime.bigint() - start) / CALLS;
}

const results: Record<string, { async: number[]; sync: number[] }> = {};
for (const name of Object.keys(variants)) results[name] = { async: [], sync: [] };
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, pets] of Object.entries(variants)) {
    results[name]?.async.push(await timeAsync(pets));
    results[name]?.sync.push(timeSync(pets));
  }
}
const ns = Object.fromEntries(
  Object.entries(results).map(([name, r]) => [
    name,
    { asyncNs: Math.round(median(r.async) * 10) / 10, syncNs: Math.round(median(r.sync) * 10) / 10 },
  ]),
);
const ratio = (a: string, b: string, kind: 'asyncNs' | 'syncNs') =>
  Math.round(((ns[a]?.[kind] ?? 0) / (ns[b]?.[kind] ?? 1)) * 100) / 100;
console.log(
  JSON.stringify({
    calls: CALLS,
    rounds: ROUNDS,
    node: process.version,
    ns,
    layersOverNow: { async: ratio('layers', 'now', 'asyncNs'), sync: ratio('layers', 'now', 'syncNs') },
    splitOverNow: { async: ratio('split', 'now', 'asyncNs'), sync: ratio('split', 'now', 'syncNs') },
    errors,
  }),
);
