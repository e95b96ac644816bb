import { Command } from 'commander';
import type { SchemaVersions } from '../domain/storage.js';
import { databaseLocation } from '../storage/open-storage.js';
import type { CliIo } from './io.js';
import { withStorage } from './with-storage.js';

export function migrateCommand(io: CliIo): Command {
  return new Command('migrate')
    .description('apply pending schema migrations and exit')
    .addHelpText(
      'after',
      '\n`serve` applies pending migrations at start too; this runs them ahead of a deploy.',
    )
    .action(async () => {
      // Opening the storage applies its migrations, and reports what it found and did.
      const schema = await withStorage(io, async (storage) => storage.schema, {
        create: true,
        announce: false,
      });
      const { loadConfig } = await import('../config/config.js');
      io.stderr.write(`${describeMigration(schema)}: ${databaseLocation(loadConfig(io.env).databaseUrl)}\n`);
    });
}

/** What `migrate` did, in words: "created", "migrated from version 1 to 3", "already up to date". */
export function describeMigration({ from, to }: SchemaVersions): string {
  if (from === 0) return `created the database schema (version ${to})`;
  if (from < to) return `migrated the database schema from version ${from} to ${to}`;
  return `the database schema is already up to date (version ${to})`;
}
