/**
 * What the wrappers around a storage call cost: `npm run bench -- storage-boundary [--calls 1000000]
 * [--rounds 5]`. A store whose method answers at once (a resolved promise, as a cached read does; and a
 * plain value, as SQLite's reads do) is called through:
 * - `bare`: nothing;
 * - `layers`: the four wrappers the service put around each call until this file's first version, one
 *   after the other, as app.ts and the PostgreSQL adapter composed them: the adapter's translation of
 *   its driver's errors (translateUnavailable), the replicas' recording of writes (recordingWrites, a
 *   pass-through for a read), the app's counting of errors and outages (metrics.instrument), and
 *   tracing's span per call (tracing.storage.instrument), made here from the same primitives;
 * - `now`: what a call crosses today: the adapter's translation, then the app's one boundary
 *   (storage/boundary.ts: counting and spans in one pass); writes are recorded by the pool, not a wrapper;
 * - `one`: a single boundary doing translation, counting and spans, for comparison.
 * Tracing is on but the caller is in no sampled trace (every background call, and most requests).
 * Each round runs every variant in turn; the median nanoseconds per call over the rounds, and the
 * ratios to `one`, printed as one JSON line. A measurement, not a test: nothing is asserted.
 *
 * On 2 shared cores, Node.js 20, 1,000,000 calls, 5 rounds: a promise-returning call took 44.6 ns bare,
 * 186 through the four layers, 162 now, 132 through one (layers / now 1.15, layers / one 1.41); a plain
 * value 6.5, 73.5, 57.4 and 50.5 ns (1.28 and 1.46). What separating the adapter's translation still
 * costs (now / one: 1.23 and 1.14) is 30 ns and 7 ns a call, against a database round trip of 50 µs and
 * more; it stays with the adapter, where every user of the storage gets the domain's errors (the command
 * line, the probes, tests, not only the app), while counting and spans are the app's, in one pass.
 */
import { parseArgs } from 'node:util';
import { trace } from '@opentelemetry/api';
import { StorageUnavailableError } from '../src/domain/errors.js';
import type { Storage } from '../src/domain/storage.js';
import { storageBoundary } from '../src/storage/boundary.js';
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
  now: storageBoundary(storageOf(translateUnavailable(new Pets(), isUnavailable)), {
    ...counted,
    around: (operation, run) => spans.around(operation, run),
  }).pets as unknown as Variant,
  one: storageBoundary(storageOf(new Pets()), {
    translate: (error) => toStorageError(error, isUnavailable),
    ...counted,
    around: (operation, run) => spans.around(operation, run),
  }).pets as unknown as Variant,
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
    layersOverOne: { async: ratio('layers', 'one', 'asyncNs'), sync: ratio('layers', 'one', 'syncNs') },
    nowOverOne: { async: ratio('now', 'one', 'asyncNs'), sync: ratio('now', 'one', 'syncNs') },
    errors,
  }),
);
