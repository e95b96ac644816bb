#!/usr/bin/env node
import { Command } from 'commander';
import { keysCommand } from './keys.js';
import { migrateCommand } from './migrate.js';
import { migrateDataCommand } from './migrate-data.js';
import { seedCommand } from './seed.js';
import { serveCommand } from './serve.js';

const program = new Command('petstore')
  .description('The animal store service: an HTTP+JSON API for animals, guarded by API keys.')
  .addHelpText('after', '\nConfiguration comes from environment variables; see `petstore serve --help`.');

program.addCommand(serveCommand());
program.addCommand(keysCommand());
program.addCommand(migrateCommand());
program.addCommand(migrateDataCommand());
program.addCommand(seedCommand());

try {
  // `serve` is what a bare `petstore` does; a mistyped command is still reported as unknown.
  const args = process.argv.slice(2);
  await program.parseAsync(args.length > 0 ? args : ['serve'], { from: 'user' });
} catch (error) {
  process.stderr.write(`petstore: ${(error as Error).message}\n`);
  // exit, not exitCode: a cluster worker's channel to its primary (or a half-open pool) would keep the
  // process alive after a failed start. stderr is written synchronously, so the line is not lost.
  process.exit(1);
}
