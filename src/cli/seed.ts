import { Command, InvalidArgumentError } from 'commander';
import { samplePet } from '../domain/sample-pets.js';
import { ProgressLine } from './progress-line.js';
import { withStorage } from './with-storage.js';

const MAX_COUNT = 100_000_000;

function count(value: string): number {
  const parsed = Number(value);
  if (!/^\d+$/.test(value) || parsed < 1 || parsed > MAX_COUNT) {
    throw new InvalidArgumentError(`expected an integer from 1 to ${MAX_COUNT}`);
  }
  return parsed;
}

export function seedCommand(): Command {
  return new Command('seed')
    .description('add realistic animals, for demos and benchmarks')
    .option('-c, --count <n>', 'how many animals to add', count, 1000)
    .option('--batch-size <n>', 'animals per transaction', count, 5000)
    .addHelpText(
      'after',
      '\nAnimals are added in batches, one transaction each (not one HTTP call per animal).',
    )
    .action(async ({ count: total, batchSize }: { count: number; batchSize: number }) => {
      const progress = new ProgressLine();
      await withStorage(async (storage) => {
        for (let added = 0; added < total; ) {
          const batch = Array.from({ length: Math.min(batchSize, total - added) }, () => samplePet());
          added += (await storage.pets.createMany(batch)).length;
          progress.update(
            `seeding: ${added} of ${total} animals (${Math.floor((added / total) * 100)}%)`,
            added === total,
          );
        }
        await storage.analyze();
      });
    });
}
