import cluster from 'node:cluster';
import type { Command, CommanderError } from 'commander';
import { type CliIo, processIo } from './io.js';
import { petstoreProgram } from './program.js';
import { addEnvironmentHelp } from './serve.js';

/** Commander has written what it had to say (help, the version, a usage error): exit with this code. */
class CommanderExit extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

/**
 * Runs `petstore <argv>` and resolves to its exit status: 0, or non-zero once one line saying what went
 * wrong has been written to stderr. `serve` resolves once it listens (the process then keeps serving).
 * main.ts runs it with the process's own streams and environment; tests of parsing, output and exit
 * codes with their own.
 */
export async function run(argv: readonly string[], io: CliIo = processIo()): Promise<number> {
  const program = petstoreProgram(io);
  configure(program, io);
  // `serve` is what a bare `petstore` does; a mistyped command is still reported as unknown.
  const args = argv.length > 0 ? [...argv] : ['serve'];
  try {
    // serve's help lists every variable of the configuration, loaded only when serve is named
    // (`serve`, `serve --help`, `help serve`): other commands, --version and --help start without it.
    const serve = program.commands.find((command) => command.name() === 'serve');
    if (serve && args.includes('serve')) await addEnvironmentHelp(serve);
    await program.parseAsync(args, { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderExit) return error.code;
    const message = (error as Error).message;
    if (cluster.isWorker) {
      // A worker's lines are its primary's log: one JSON line like every other (stdout, a pipe, is
      // written synchronously, so it is not lost to the exit).
      const { pino } = await import('pino');
      pino(pino.destination({ dest: 1, sync: true })).fatal({ err: error }, `cannot start: ${message}`);
    } else io.stderr.write(`petstore: ${message}\n`);
    return 1;
  }
}

/**
 * Commander's output to `io`, and its exits (help, version, usage errors) as an exit status rather than
 * process.exit: on every command, since addCommand does not pass these settings down.
 */
function configure(command: Command, io: CliIo): void {
  command
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
      getOutHasColors: () => false,
      getErrHasColors: () => false,
      // A terminal's width, else commander's 80 (its types say number; undefined is its own default).
      getOutHelpWidth: () => (io.stdout.isTTY ? io.stdout.columns : undefined) as number,
      getErrHelpWidth: () => (io.stderr.isTTY ? io.stderr.columns : undefined) as number,
    })
    .exitOverride((error: CommanderError) => {
      throw new CommanderExit(error.exitCode);
    });
  for (const sub of command.commands) configure(sub, io);
}
