import { Command } from 'commander';
import { withStorage } from './with-storage.js';

export function migrateCommand(): Command {
  return new Command('migrate')
    .description('apply pending schema migrations and exit')
    .addHelpText(
      'after',
      '\n`serve` applies pending migrations at start too; this runs them ahead of a deploy.',
    )
    .action(async () => {
      // Opening the storage applies its migrations.
      await withStorage(async () => undefined);
      process.stderr.write('database schema is up to date\n');
    });
}
