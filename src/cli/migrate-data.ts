import { Command, InvalidArgumentError } from 'commander';
import { type CopyProgress, copyData, type DataDigest, digestData } from '../storage/copy-data.js';
import { openStorage } from '../storage/open-storage.js';
import type { Storage } from '../storage/storage.js';
import { ProgressLine } from './progress-line.js';

// The copy runs one query at a time on each side.
const POOL_SIZE = 2;

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
transaction; rows the target holds already are skipped (a key revoked in the source is revoked in the
target too), so a stopped run can simply be run again. It ends by comparing the count and a SHA-256 of
every pet and key on both sides, and exits non-zero if they differ. Stop writes to the source first,
or run it again after the switch to pick up what arrived meanwhile.`,
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
  progress.update('comparing both databases: counts and a SHA-256 of every row…', true);

  const [before, after] = await Promise.all([digestData(source, batchSize), digestData(target, batchSize)]);
  const differences = compare(before, after);
  for (const line of differences.report) process.stdout.write(`${line}\n`);
  if (differences.differ.length > 0) {
    throw new Error(`the databases differ after copying (${differences.differ.join(', ')}); see above`);
  }
  process.stdout.write('both databases hold the same pets and API keys\n');
}

function describe({ what, read, total, written }: CopyProgress): string {
  const percent = total === 0 ? 100 : Math.floor((read / total) * 100);
  return `${what}: ${read} of ${total} read (${percent}%), ${written} written, ${read - written} already there`;
}

function compare(source: DataDigest, target: DataDigest): { report: string[]; differ: string[] } {
  const report: string[] = [];
  const differ: string[] = [];
  for (const [label, table] of [
    ['api keys', 'apiKeys'],
    ['pets', 'pets'],
  ] as const) {
    const a = source[table];
    const b = target[table];
    const same = a.count === b.count && a.sha256 === b.sha256;
    if (!same) differ.push(label);
    report.push(
      `${label}: source ${a.count} (sha256 ${a.sha256.slice(0, 16)}), target ${b.count} (sha256 ${b.sha256.slice(0, 16)}): ${same ? 'identical' : 'DIFFERENT'}`,
    );
  }
  return { report, differ };
}

/** A URL fit for an error message: any password replaced. */
function withoutPassword(url: string): string {
  if (!URL.canParse(url)) return url;
  const parsed = new URL(url);
  if (parsed.password === '') return url;
  parsed.password = '***';
  return parsed.href;
}
