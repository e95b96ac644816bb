import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { Command, InvalidArgumentError, Option } from 'commander';
import type { Role } from '../app.js';
import type { CliIo } from './io.js';

/** `--workers`: a positive count, or `auto` for one per core. */
function parseWorkers(value: string): number {
  if (value === 'auto') return availableParallelism();
  if (!/^[1-9]\d{0,3}$/.test(value)) throw new InvalidArgumentError('expected a positive integer or "auto"');
  return Number(value);
}

/**
 * `serve --help`'s list of environment variables, added once the configuration is loaded: run.ts calls
 * it when `serve` is named, so other commands, `--version` and `--help` start without the
 * configuration's schema and validator.
 */
export async function addEnvironmentHelp(serve: Command): Promise<void> {
  const { describeConfig } = await import('../config/config.js');
  const described = describeConfig();
  // Every description starts in one column, however long the longest name.
  const width = Math.max(...described.map((v) => v.name.length));
  const variables = described
    .map(
      (v) =>
        `  ${v.name.padEnd(width)}  ${v.description}${v.default === undefined ? '' : ` (default: ${JSON.stringify(v.default)})`}`,
    )
    .join('\n');
  serve.addHelpText('after', `\nEnvironment variables:\n${variables}`);
}

export function serveCommand(io: CliIo): Command {
  return new Command('serve')
    .description('run the HTTP service (the default command)')
    .option(
      '-w, --workers <count>',
      'processes serving on the one port: a number, or "auto" for one per core',
      parseWorkers,
      1,
    )
    .addOption(
      // The list is written out here: importing app.ts for it would load Fastify for every command.
      new Option(
        '--role <role>',
        'what the process does: "api" serves the API and delivers no webhook; "deliver" delivers webhooks and answers only /healthz, /readyz and /metrics; "all" does both',
      )
        .choices(['all', 'api', 'deliver'])
        .default('all'),
    )
    .action(async ({ workers, role }: { workers: number; role: Role }) => {
      // Loaded here, not at the top: the other commands and --help then start without Fastify and
      // the storage drivers, in about half the time.
      const { loadConfig } = await import('../config/config.js');
      const config = loadConfig(io.env);
      const { runCluster, STOP_ACCEPTING, STOPPED_ACCEPTING } = await import('../cluster.js');
      const { startServer } = await import('../server.js');
      if (workers > 1 && cluster.isPrimary) return runCluster(config, workers, role);
      // Handlers first, so that no moment exists when the process serves but a SIGTERM (from an
      // orchestrator or a cluster primary) or SIGINT (a terminal) would kill it undrained. A signal
      // during start-up takes effect once the start has completed or failed.
      // A worker leaves the first key to its primary, which creates it once all workers listen; a
      // delivery process leaves it to the API's.
      const starting = startServer(config, { createFirstKey: cluster.isPrimary && role !== 'deliver', role });
      for (const signal of ['SIGTERM', 'SIGINT'] as const) {
        process.once(signal, () => {
          starting.then(
            (server) => {
              server.app.log.info({ signal }, 'shutting down');
              server.close().then(
                () => process.exit(0),
                (error: unknown) => {
                  server.app.log.error({ err: error }, 'shutdown failed');
                  process.exit(1);
                },
              );
            },
            () => undefined, // the failed start is reported, and the process exits, by main
          );
        });
      }
      // Under --workers, the primary has every worker stop accepting before it tells any to drain.
      process.on('message', (message) => {
        if (message !== STOP_ACCEPTING) return;
        starting.then(
          (server) => {
            server.stopAccepting();
            process.send?.(STOPPED_ACCEPTING);
          },
          () => undefined,
        );
      });
      // The database it opened is a line of the JSON log (server.ts), not plain text on stderr: a log
      // pipeline reading this process's output as JSON lines must not meet a line it cannot parse.
      await starting;
    });
}
