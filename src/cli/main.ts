#!/usr/bin/env node
import cluster from 'node:cluster';
import { petstoreProgram } from './program.js';

try {
  // `serve` is what a bare `petstore` does; a mistyped command is still reported as unknown.
  const args = process.argv.slice(2);
  await petstoreProgram().parseAsync(args.length > 0 ? args : ['serve'], { from: 'user' });
} catch (error) {
  const message = (error as Error).message;
  if (cluster.isWorker) {
    // A worker's lines are its primary's log: one JSON line like every other (stdout, a pipe, is
    // written synchronously, so it is not lost to the exit).
    const { pino } = await import('pino');
    pino(pino.destination({ dest: 1, sync: true })).fatal({ err: error }, `cannot start: ${message}`);
  } else process.stderr.write(`petstore: ${message}\n`);
  // exit, not exitCode: a cluster worker's channel to its primary (or a half-open pool) would keep the
  // process alive after a failed start. stderr is written synchronously, so the line is not lost.
  process.exit(1);
}
