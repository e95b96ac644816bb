import { Command, InvalidArgumentError } from 'commander';
import type { Order } from '../domain/order.js';
import type { Pet } from '../domain/pet.js';
import type { Storage } from '../domain/storage.js';
import {
  type Conflict,
  type CopyProgress,
  compareData,
  copyData,
  type TableComparison,
} from '../storage/copy-data.js';
import { databaseLocation, openStorage } from '../storage/open-storage.js';
import type { CliIo } from './io.js';
import { ProgressLine } from './progress-line.js';
import { refuseMissingDatabase } from './with-storage.js';

// The copy runs one query at a time on each side.
const POOL_SIZE = 2;
/** Conflicting pets (and orders) listed one per line; beyond these they are only counted, so the report stays readable. */
const CONFLICTS_LISTED = 100;

function positiveInteger(value: string): number {
  if (!/^[1-9]\d{0,5}$/.test(value)) throw new InvalidArgumentError('expected an integer from 1 to 999999');
  return Number(value);
}

/** Each database from its option, else from the environment (read from `io.env`, not commander's process.env). */
const DATABASES = {
  from: { flags: '--from <url>', env: 'MIGRATE_FROM_DATABASE_URL' },
  to: { flags: '--to <url>', env: 'MIGRATE_TO_DATABASE_URL' },
} as const;

export function migrateDataCommand(io: CliIo): Command {
  return (
    new Command('migrate-data')
      .description('copy everything to another database, and verify')
      // From the environment too, so a URL with a password need not be on the command line (and in ps).
      .option(
        DATABASES.from.flags,
        `the database to copy from, e.g. sqlite:./data/petstore.db (env: ${DATABASES.from.env})`,
      )
      .option(
        DATABASES.to.flags,
        `the database to copy into, e.g. postgres://user@host/db (env: ${DATABASES.to.env})`,
      )
      .option('--batch-size <rows>', 'rows per read and per target transaction', positiveInteger, 1000)
      .addHelpText(
        'after',
        `
Pets and orders keep their ids and API keys their hashes, so existing keys go on working. Each batch
is one transaction. A pet or order whose id the target does not hold is copied; one the target holds
already is never overwritten (a key revoked in the source is revoked in the target too). An order is
copied only when its animal is the same on both sides, status included, so an order and its animal
always agree in the target. So a stopped run can simply be run again, and so can a run after the
switch: pets and orders created in the source meanwhile are copied, and what the target did since is
kept (its pets, its orders, the animal statuses its orders set). It ends by comparing every field of
every pet, order and key of the source with the target, and exits non-zero if one is missing or if an
id holds something different on each side (both sides took writes): each is printed, with both
versions, and neither is changed.`,
      )
      .action(async (options: { from?: string; to?: string; batchSize: number }, command: Command) => {
        const [from, to] = (['from', 'to'] as const).map((name) => {
          const url = options[name] ?? io.env[DATABASES[name].env];
          // As commander words a missing mandatory option (and exits 1, printing nothing else).
          if (url === undefined)
            command.error(`error: required option '${DATABASES[name].flags}' not specified`);
          return url;
        }) as [string, string];
        const { batchSize } = options;
        if (from === to) throw new Error('--from and --to name the same database');
        // The target may be new (filling one is the point); a source that does not exist is a mistake.
        refuseMissingDatabase(from, '--from');
        const source = await open(io, '--from', from);
        try {
          const target = await open(io, '--to', to);
          try {
            await migrate(io, source, target, batchSize);
          } finally {
            await target.close();
          }
        } finally {
          await source.close();
        }
      })
  );
}

// A batch of a bulk copy may rightly take longer than any request should.
const COPY_TIMEOUT_MS = 60_000;

async function open(io: CliIo, option: string, url: string): Promise<Storage> {
  try {
    const storage = await openStorage({
      databaseUrl: url,
      databasePoolSize: POOL_SIZE,
      databaseTimeoutMs: COPY_TIMEOUT_MS,
    });
    io.stderr.write(`database ${option}: ${databaseLocation(url)}\n`);
    return storage;
  } catch (error) {
    throw new Error(`${option} ${withoutPassword(url)}: ${(error as Error).message}`);
  }
}

async function migrate(io: CliIo, source: Storage, target: Storage, batchSize: number): Promise<void> {
  const progress = new ProgressLine(io.stderr);
  let last: CopyProgress | undefined;
  await copyData(source, target, {
    batchSize,
    onProgress: (p) => {
      // Keys, then pets: each table's last figures stay on screen.
      if (last && last.what !== p.what) progress.update(describe(last), true);
      last = p;
      progress.update(describe(p));
    },
  });
  if (last) progress.update(describe(last), true);
  progress.update('comparing every pet, order and API key of the source with the target…', true);

  const { apiKeys, pets, orders, petConflicts, orderConflicts, missingOrders } = await compareData(
    source,
    target,
    { batchSize, maxListed: CONFLICTS_LISTED },
  );
  io.stdout.write(
    `${summary('api keys', apiKeys)}\n${summary('pets', pets)}\n${summary('orders', orders)}\n`,
  );
  for (const conflict of petConflicts) io.stdout.write(`${describeConflict('pet', conflict, petFields)}\n`);
  if (pets.conflicts > petConflicts.length)
    io.stdout.write(`… and ${pets.conflicts - petConflicts.length} more conflicting pets, not listed\n`);
  for (const conflict of orderConflicts)
    io.stdout.write(`${describeConflict('order', conflict, orderFields)}\n`);
  if (orders.conflicts > orderConflicts.length)
    io.stdout.write(
      `… and ${orders.conflicts - orderConflicts.length} more conflicting orders, not listed\n`,
    );
  for (const order of missingOrders)
    io.stdout.write(`missing: order ${order.id} is ${orderFields(order)} in the source, not in the target\n`);
  if (orders.missing > missingOrders.length)
    io.stdout.write(`… and ${orders.missing - missingOrders.length} more missing orders, not listed\n`);

  const problems = [
    pets.conflicts > 0 &&
      (pets.conflicts === 1
        ? '1 pet of the source was not copied: its id holds a different pet in the target (listed above)'
        : `${pets.conflicts} pets of the source were not copied: their ids hold different pets in the target (listed above)`),
    apiKeys.conflicts > 0 && `${apiKeys.conflicts} API keys differ between the source and the target`,
    orders.conflicts > 0 &&
      `${orders.conflicts === 1 ? '1 order differs' : `${orders.conflicts} orders differ`} between the source and the target (listed above)`,
    pets.missing + apiKeys.missing > 0 &&
      `${pets.missing} pets and ${apiKeys.missing} API keys arrived in the source during the copy: run it again`,
    orders.missing > 0 &&
      `${orders.missing === 1 ? '1 order of the source is' : `${orders.missing} orders of the source are`} not in the target (listed above): placed in the source during the copy (run it again), or for an animal that differs between the two (settle it first)`,
  ].filter((problem): problem is string => typeof problem === 'string');
  if (problems.length > 0) throw new Error(`${problems.join('; ')}; nothing was overwritten`);
  io.stdout.write('every pet, order and API key of the source is in the target\n');
}

function describe({ what, read, total, written, leftOut = 0 }: CopyProgress): string {
  const percent = total === 0 ? 100 : Math.floor((read / total) * 100);
  const left = leftOut > 0 ? `, ${leftOut} left out (their animal differs)` : '';
  return `${what}: ${read} of ${total} read (${percent}%), ${written} written, ${read - written - leftOut} already there${left}`;
}

/** e.g. `pets: 3003 in the source, 3002 in the target, 1 CONFLICTING; 4 only in the target (kept)` */
function summary(
  label: string,
  { source, inTarget, missing, conflicts, onlyInTarget }: TableComparison,
): string {
  const problems = [conflicts > 0 && `${conflicts} CONFLICTING`, missing > 0 && `${missing} MISSING`].filter(
    Boolean,
  );
  const held =
    problems.length === 0 ? 'all in the target' : `${inTarget} in the target, ${problems.join(', ')}`;
  return `${label}: ${source} in the source, ${held}; ${onlyInTarget} only in the target (kept)`;
}

const petFields = (pet: Pet) =>
  JSON.stringify({ name: pet.name, categoryId: String(pet.categoryId), status: pet.status });
const orderFields = (order: Order) =>
  JSON.stringify({
    petId: String(order.petId),
    status: order.status,
    placedAt: order.placedAt.toISOString(),
  });

function describeConflict<T extends { id: bigint }>(
  what: string,
  { source, target }: Conflict<T>,
  fields: (row: T) => string,
): string {
  return `conflict: ${what} ${source.id} is ${fields(source)} in the source but ${fields(target)} in the target; the target's was kept`;
}

/** A URL fit for an error message: any password replaced. */
function withoutPassword(url: string): string {
  if (!URL.canParse(url)) return url;
  const parsed = new URL(url);
  if (parsed.password === '') return url;
  parsed.password = '***';
  return parsed.href;
}
