#!/usr/bin/env node
import { petstoreProgram } from './program.js';

try {
  // `serve` is what a bare `petstore` does; a mistyped command is still reported as unknown.
  const args = process.argv.slice(2);
  await petstoreProgram().parseAsync(args.length > 0 ? args : ['serve'], { from: 'user' });
} catch (error) {
  process.stderr.write(`petstore: ${(error as Error).message}\n`);
  // exit, not exitCode: a cluster worker's channel to its primary (or a half-open pool) would keep the
  // process alive after a failed start. stderr is written synchronously, so the line is not lost.
  process.exit(1);
}
