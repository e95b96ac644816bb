import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { pino } from 'pino';
import { RequestLogger } from '../../src/http/observability/request-logger.js';

/** A pino logger writing into an array, with a fixed time, and the bindings of every child it made. */
function capture(level = 'info') {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const logger = pino({ level, timestamp: () => ',"time":1' }, stream);
  const made: object[] = [];
  const child = logger.child.bind(logger);
  logger.child = ((bindings, options) => {
    made.push(bindings);
    return child(bindings, options);
  }) as typeof logger.child;
  return { logger: logger as unknown as FastifyBaseLogger, lines, made };
}

const flushed = () => new Promise((resolve) => setImmediate(resolve));

// A request line as RequestLog builds it: the logger's binding first, then the request's figures.
const line = {
  requestId: 'r-1',
  method: 'GET',
  url: '/v1/pets/5',
  statusCode: 200,
  ms: 0.5,
  apiKeyId: undefined,
};
const { requestId: _, ...figures } = line;

test("when a request's line is written, then it is byte for byte what its own child logger would write, and no child is made", async () => {
  const error = Object.assign(new Error('boom'), { code: 'X' });
  const viaChild = capture();
  const child = viaChild.logger.child({ requestId: 'r-1' });
  child.info(figures, 'request');
  child.warn({ ...figures, statusCode: 503 }, 'request');
  child.error({ ...figures, err: error }, 'request errored');

  const viaLine = capture();
  const logger = new RequestLogger(viaLine.logger, { requestId: 'r-1' }, {});
  logger.line('info', line, 'request');
  logger.line('warn', { ...line, statusCode: 503 }, 'request');
  logger.line('error', { ...line, err: error }, 'request errored');
  await flushed();

  assert.equal(viaLine.lines.length, 3);
  assert.deepEqual(viaLine.lines, viaChild.lines);
  assert.match(
    viaLine.lines[0] as string,
    /^\{"level":30,"time":1,"pid":\d+,"hostname":"[^"]*","requestId":"r-1","method":"GET"/,
  );
  assert.deepEqual(viaLine.made, []);
});

test('when anything else is logged for the request, then its child logger is made once, with the bindings, and used from then on', async () => {
  const { logger: parent, lines, made } = capture();
  const logger = new RequestLogger(parent, { requestId: 'r-2' }, {});
  logger.warn({ detail: 1 }, 'rate limiter unavailable');
  logger.info('plain message');
  logger.line('info', { requestId: 'r-2', statusCode: 200 }, 'request');
  await flushed();
  assert.deepEqual(made, [{ requestId: 'r-2' }]);
  // Through the child, the binding is written once.
  assert.equal((lines[2]?.match(/"requestId"/g) ?? []).length, 1, lines[2]);
  assert.deepEqual(
    lines
      .map((l) => JSON.parse(l))
      .map(({ level, requestId, msg, detail }) => [level, requestId, msg, detail]),
    [
      [40, 'r-2', 'rate limiter unavailable', 1],
      [30, 'r-2', 'plain message', undefined],
      [30, 'r-2', 'request', undefined],
    ],
  );
  assert.equal(logger.level, 'info');
});

test('when the request has a log level of its own, then its lines go through its child logger, which applies it', async () => {
  const { logger: parent, lines, made } = capture('info');
  const quiet = new RequestLogger(parent, { requestId: 'r-3' }, { level: 'warn' });
  quiet.line('info', { requestId: 'r-3', statusCode: 200 }, 'request');
  quiet.line('warn', { requestId: 'r-3', statusCode: 429 }, 'request');
  await flushed();
  assert.deepEqual(made, [{ requestId: 'r-3' }]);
  assert.equal(lines.length, 1);
  assert.equal(JSON.parse(lines[0] as string).statusCode, 429);
  assert.equal((lines[0]?.match(/"requestId":"r-3"/g) ?? []).length, 1);
});
