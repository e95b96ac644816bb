#!/usr/bin/env node
import { run } from './run.js';

const code = await run(process.argv.slice(2));
// exit, not exitCode: a cluster worker's channel to its primary (or a half-open pool) would keep the
// process alive after a failed start. stderr is written synchronously, so the line is not lost.
if (code !== 0) process.exit(code);
