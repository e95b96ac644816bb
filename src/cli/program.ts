import { Command } from 'commander';
import { VERSION } from '../version.js';
import { type CliIo, processIo } from './io.js';
import { keysCommand } from './keys.js';
import { listenCommand } from './listen.js';
import { migrateCommand } from './migrate.js';
import { migrateDataCommand } from './migrate-data.js';
import { seedCommand } from './seed.js';
import { serveCommand } from './serve.js';

/** The `petstore` command line: every command it has (docs/configuration.md's command table is checked against it). */
export function petstoreProgram(io: CliIo = processIo()): Command {
  return new Command('petstore')
    .description('The animal store service: an HTTP+JSON API for animals, guarded by API keys.')
    .version(VERSION, '-V, --version', 'print the version and exit')
    .addHelpText('after', '\nConfiguration comes from environment variables; see `petstore serve --help`.')
    .addCommand(serveCommand(io))
    .addCommand(keysCommand(io))
    .addCommand(migrateCommand(io))
    .addCommand(migrateDataCommand(io))
    .addCommand(seedCommand(io))
    .addCommand(listenCommand(io));
}
