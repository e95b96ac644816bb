/**
 * Where a command writes and what environment it reads. `petstore` passes its own process's; the tests
 * of parsing, output and exit codes pass their own, and run the command line in their process.
 */
export interface CliOutput {
  write(text: string): unknown;
  /** A terminal: progress is redrawn in place on one line. */
  isTTY?: boolean;
  /** A terminal's width, for help. */
  columns?: number;
}

export interface CliIo {
  stdout: CliOutput;
  stderr: CliOutput;
  env: NodeJS.ProcessEnv;
}

/** The process's own streams and environment. */
export const processIo = (): CliIo => ({ stdout: process.stdout, stderr: process.stderr, env: process.env });
