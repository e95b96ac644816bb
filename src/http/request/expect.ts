import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError } from './errors.js';

/** Node's own test for a 100-continue expectation (lib/_http_server.js), so both agree on which is which. */
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i;

/**
 * `Expect` (RFC 9110 §10.1.1). Left alone, Node sends `100 Continue` the moment a head arrives, so a
 * client uploads its body only to be refused (401), and it answers any other expectation with a bare
 * 417. Both kinds of request go through Fastify instead: `100 Continue` is sent once the request is
 * authenticated (continueIfExpected), and an unmet expectation gets the Error body.
 */
export const expectations = fp(
  async (app: FastifyInstance) => {
    // As a 'request', the way Node itself hands them on, so the server's own admission applies too.
    const asRequest = (request: IncomingMessage, response: ServerResponse) =>
      app.server.emit('request', request, response);
    app.server.on('checkContinue', asRequest);
    app.server.on('checkExpectation', asRequest);
  },
  { name: 'expectations', fastify: '5.x' },
);

/** 100-continue is the only expectation HTTP defines, and the only one met: any other is 417. */
export function unmetExpectation(expect: string | undefined): ApiError | undefined {
  return expect === undefined || CONTINUE.test(expect)
    ? undefined
    : new ApiError('expectation_failed', 'the only expectation this service meets is Expect: 100-continue');
}

/** The request passed authentication and its body is about to be read: invite the client to send it. */
export function continueIfExpected(request: FastifyRequest, reply: FastifyReply): void {
  const { expect } = request.headers;
  // An HTTP/1.0 client cannot read an interim response (RFC 9110 §10.1.1: ignore its expectation).
  if (expect !== undefined && request.raw.httpVersion === '1.1' && CONTINUE.test(expect))
    reply.raw.writeContinue();
}
