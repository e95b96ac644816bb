#!/usr/bin/env node
import { Command } from 'commander';
import { keysCommand } from './keys.js';
import { migrateCommand } from './migrate.js';
import { migrateDataCommand } from './migrate-data.js';
import { serveCommand } from './serve.js';

const program = new Command('petstore')
  .description('The animal store service: an HTTP+JSON API for animals, guarded by API keys.')
  .addHelpText('after', '\nConfiguration comes from environment variables; see `petstore serve --help`.')
  .showHelpAfterError('(run with --help for usage)');

program.addCommand(serveCommand(), { isDefault: true });
program.addCommand(keysCommand());
program.addCommand(migrateCommand());
program.addCommand(migrateDataCommand());

try {
  await program.parseAsync();
} catch (error) {
  process.stderr.write(`petstore: ${(error as Error).message}\n`);
  process.exitCode = 1;
}
