import { Command } from 'commander';
import { describeConfig, loadConfig } from '../config/config.js';
import { startServer } from '../server.js';

export function serveCommand(): Command {
  const variables = describeConfig()
    .map(
      (v) =>
        `  ${v.name.padEnd(18)} ${v.description}${v.default === undefined ? '' : ` (default: ${JSON.stringify(v.default)})`}`,
    )
    .join('\n');
  return new Command('serve')
    .description('run the HTTP service (the default command)')
    .addHelpText('after', `\nEnvironment variables:\n${variables}`)
    .action(async () => {
      const server = await startServer(loadConfig());
      // SIGTERM from an orchestrator, SIGINT from a terminal: drain, close the database, exit 0.
      for (const signal of ['SIGTERM', 'SIGINT'] as const) {
        process.once(signal, () => {
          server.app.log.info({ signal }, 'shutting down');
          server.close().then(
            () => process.exit(0),
            (error: unknown) => {
              server.app.log.error({ err: error }, 'shutdown failed');
              process.exit(1);
            },
          );
        });
      }
    });
}
