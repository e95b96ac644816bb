import { Command, InvalidArgumentError } from 'commander';
import type { Storage } from '../domain/storage.js';
import {
  type CopyProgress,
  compareData,
  copyData,
  type PetConflict,
  type TableComparison,
} from '../storage/copy-data.js';
import { openStorage } from '../storage/open-storage.js';
import { ProgressLine } from './progress-line.js';

// The copy runs one query at a time on each side.
const POOL_SIZE = 2;
/** Conflicting pets listed one per line; beyond these they are only counted, so the report stays readable. */
const CONFLICTS_LISTED = 100;

function positiveInteger(value: string): number {
  if (!/^[1-9]\d{0,5}$/.test(value)) throw new InvalidArgumentError('expected an integer from 1 to 999999');
  return Number(value);
}

export function migrateDataCommand(): Command {
  return new Command('migrate-data')
    .description('copy pets and keys to another database, and verify')
    .requiredOption('--from <url>', 'the database to copy from, e.g. sqlite:./data/petstore.db')
    .requiredOption('--to <url>', 'the database to copy into, e.g. postgres://user@host/db')
    .option('--batch-size <rows>', 'rows per read and per target transaction', positiveInteger, 1000)
    .addHelpText(
      'after',
      `
Pets keep their ids and API keys their hashes, so existing keys go on working. Each batch is one
transaction. A pet whose id the target does not hold is copied; one the target holds already is never
overwritten (a key revoked in the source is revoked in the target too). So a stopped run can simply be
run again, and so can a run after the switch: pets created in the source meanwhile are copied, and
pets created in the target are kept. It ends by comparing every field of every pet and key of the
source with the target, and exits non-zero if one is missing or if an id holds a different pet on each
side (both sides took writes): each such id is printed, with both pets, and neither is changed.`,
    )
    .action(async ({ from, to, batchSize }: { from: string; to: string; batchSize: number }) => {
      if (from === to) throw new Error('--from and --to name the same database');
      const source = await open('--from', from);
      try {
        const target = await open('--to', to);
        try {
          await migrate(source, target, batchSize);
        } finally {
          await target.close();
        }
      } finally {
        await source.close();
      }
    });
}

// A batch of a bulk copy may rightly take longer than any request should.
const COPY_TIMEOUT_MS = 60_000;

async function open(option: string, url: string): Promise<Storage> {
  try {
    return await openStorage({
      databaseUrl: url,
      databasePoolSize: POOL_SIZE,
      databaseTimeoutMs: COPY_TIMEOUT_MS,
    });
  } catch (error) {
    throw new Error(`${option} ${withoutPassword(url)}: ${(error as Error).message}`);
  }
}

async function migrate(source: Storage, target: Storage, batchSize: number): Promise<void> {
  const progress = new ProgressLine();
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
  progress.update('comparing every pet and API key of the source with the target…', true);

  const { apiKeys, pets, petConflicts } = await compareData(source, target, {
    batchSize,
    maxListed: CONFLICTS_LISTED,
  });
  process.stdout.write(`${summary('api keys', apiKeys)}\n${summary('pets', pets)}\n`);
  for (const conflict of petConflicts) process.stdout.write(`${describeConflict(conflict)}\n`);
  if (pets.conflicts > petConflicts.length)
    process.stdout.write(`… and ${pets.conflicts - petConflicts.length} more conflicting pets, not listed\n`);

  const problems = [
    pets.conflicts > 0 &&
      (pets.conflicts === 1
        ? '1 pet of the source was not copied: its id holds a different pet in the target (listed above)'
        : `${pets.conflicts} pets of the source were not copied: their ids hold different pets in the target (listed above)`),
    apiKeys.conflicts > 0 && `${apiKeys.conflicts} API keys differ between the source and the target`,
    pets.missing + apiKeys.missing > 0 &&
      `${pets.missing} pets and ${apiKeys.missing} API keys arrived in the source during the copy: run it again`,
  ].filter((problem): problem is string => typeof problem === 'string');
  if (problems.length > 0) throw new Error(`${problems.join('; ')}; nothing was overwritten`);
  process.stdout.write('every pet and API key of the source is in the target\n');
}

function describe({ what, read, total, written }: CopyProgress): string {
  const percent = total === 0 ? 100 : Math.floor((read / total) * 100);
  return `${what}: ${read} of ${total} read (${percent}%), ${written} written, ${read - written} already there`;
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

function describeConflict({ source, target }: PetConflict): string {
  const fields = (pet: PetConflict['source']) =>
    JSON.stringify({ name: pet.name, categoryId: String(pet.categoryId), status: pet.status });
  return `conflict: pet ${source.id} is ${fields(source)} in the source but ${fields(target)} in the target; the target's was kept`;
}

/** A URL fit for an error message: any password replaced. */
function withoutPassword(url: string): string {
  if (!URL.canParse(url)) return url;
  const parsed = new URL(url);
  if (parsed.password === '') return url;
  parsed.password = '***';
  return parsed.href;
}
