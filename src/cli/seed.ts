import { Command, InvalidArgumentError } from 'commander';
import { DEFAULT_ORDER_SHARES, sampleOrderStatus } from '../domain/sample-orders.js';
import { samplePet } from '../domain/sample-pets.js';
import type { OrderRecordInput } from '../domain/storage.js';
import type { CliIo } from './io.js';
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

function share(value: string): number {
  const parsed = Number(value);
  if (!/^(0|1|0?\.\d+|1\.0*)$/.test(value) || parsed > 1) {
    throw new InvalidArgumentError('expected a share from 0 to 1, e.g. 0.3');
  }
  return parsed;
}

interface SeedOptions {
  count: number;
  batchSize: number;
  orders: number;
  delivered: number;
  cancelled: number;
}

export function seedCommand(io: CliIo): Command {
  return new Command('seed')
    .description('add realistic animals and orders (demos, benchmarks)')
    .option('-c, --count <n>', 'how many animals to add', count, 1000)
    .option('--batch-size <n>', 'animals per transaction', count, 5000)
    .option(
      '--orders <share>',
      'share of the new animals that get an order',
      share,
      DEFAULT_ORDER_SHARES.ordered,
    )
    .option('--delivered <share>', 'share of those orders delivered', share, DEFAULT_ORDER_SHARES.delivered)
    .option('--cancelled <share>', 'share of those orders cancelled', share, DEFAULT_ORDER_SHARES.cancelled)
    .addHelpText(
      'after',
      `
Animals are added in batches, one transaction each (not one HTTP call per animal). A share of them
(--orders) gets an order: placed (the animal pending), delivered (sold) or cancelled (available
again), each animal with the status its order implies, as if the order had gone through the API.
--delivered and --cancelled are shares of those orders; the rest stay placed. --orders 0 adds
animals only.`,
    )
    .action(async ({ count: total, batchSize, orders: ordered, delivered, cancelled }: SeedOptions) => {
      if (delivered + cancelled > 1)
        throw new InvalidArgumentError('--delivered and --cancelled add up to more than 1');
      const shares = { ordered, delivered, cancelled };
      const progress = new ProgressLine(io.stderr);
      await withStorage(io, async (storage) => {
        let placed = 0;
        for (let added = 0; added < total; ) {
          const pets = Array.from({ length: Math.min(batchSize, total - added) }, () => samplePet());
          const orderStatuses = pets.map(() => sampleOrderStatus(shares));
          // An animal about to be ordered is created available, then takes the status its order gives.
          for (const [i, status] of orderStatuses.entries())
            if (status) (pets[i] as (typeof pets)[0]).status = 'available';
          const created = await storage.pets.createMany(pets);
          const at = new Date();
          const orders = created.flatMap((pet, i): OrderRecordInput[] => {
            const status = orderStatuses[i];
            return status ? [{ petId: pet.id, status, placedAt: at }] : [];
          });
          placed += (await storage.orders.createMany(orders)).length;
          added += created.length;
          progress.update(
            `seeding: ${added} of ${total} animals (${Math.floor((added / total) * 100)}%), ${placed} orders`,
            added === total,
          );
        }
        await storage.analyze();
      });
    });
}
