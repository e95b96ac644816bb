import { Command } from 'commander';
import { withStorage } from './with-storage.js';

export function migrateCommand(): Command {
  return new Command('migrate')
    .description('apply pending schema migrations and exit (serve also applies them at start)')
    .action(async () => {
      // Opening the storage applies its migrations.
      await withStorage(async () => undefined);
      process.stderr.write('database schema is up to date\n');
    });
}
