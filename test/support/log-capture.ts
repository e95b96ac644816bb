import { Writable } from 'node:stream';
import pino from 'pino';

export type LogLine = Record<string, unknown>;

/** A pino logger at `level` whose lines the test reads back, parsed, in order. */
export function captureLog(level: pino.LevelWithSilent = 'info'): { lines: LogLine[]; logger: pino.Logger } {
  const lines: LogLine[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logger: pino({ level }, sink) };
}
