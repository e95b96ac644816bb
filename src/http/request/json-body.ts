import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { parse } from 'lossless-json';
import { ApiError } from './errors.js';
import { continueIfExpected } from './expect.js';
import { isRepeated } from './request-head.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });
const INTEGER_LITERAL = /^-?(0|[1-9][0-9]*)$/;

/**
 * How a JSON number becomes a value, exactly: JSON.parse would round 9007199254740993 to
 * 9007199254740992 and 1e-400 to 0, and no check after it could tell.
 * - An integer literal is a number when that is exact, else a bigint.
 * - A fraction or exponent literal stays a double, but one that lands on an integer (1e-400, 1.0,
 *   9007199254740993.5) becomes NaN so it can never pass as an integer: integer fields take integer
 *   literals, as Go's and Rust's decoders require too.
 */
export function parseJsonNumber(text: string): number | bigint {
  if (INTEGER_LITERAL.test(text)) {
    const value = Number(text);
    return Number.isSafeInteger(value) ? value : BigInt(text);
  }
  const value = Number(text);
  return Number.isInteger(value) ? Number.NaN : value;
}

/** Parses a UTF-8 JSON body exactly; anything else is a 400 with the reason. */
export function parseJsonBody(body: Buffer): unknown {
  if (body.length === 0) throw new ApiError('invalid_request', 'request body is required');
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw new ApiError('invalid_request', 'request body is not valid UTF-8');
  }
  try {
    // lossless-json also refuses duplicate keys with different values and stores `__proto__` as a
    // plain property, so prototype poisoning has nothing to grab.
    return parse(text, null, parseJsonNumber);
  } catch (error) {
    const reason = error instanceof RangeError ? 'it is nested too deeply' : (error as Error).message;
    throw new ApiError('invalid_request', `request body is not valid JSON: ${reason}`);
  }
}

/** JSON Merge Patch (RFC 7396): what PATCH takes, beside application/json. */
export const MERGE_PATCH = 'application/merge-patch+json';

/**
 * Only application/json bodies are accepted (any charset parameter), and application/merge-patch+json
 * on PATCH; everything else is 415.
 */
export const jsonBody = fp(
  async (app: FastifyInstance, { bodyLimit }: { bodyLimit: number }) => {
    app.removeAllContentTypeParsers();
    // preParsing: after every onRequest hook, authentication included, and before the body is read.
    // A callback, not an async function: it runs for every request, bodiless ones included.
    app.addHook('preParsing', (request, reply, payload, done) => {
      if (
        request.headers['content-type'] !== undefined &&
        isRepeated(request.raw.rawHeaders, 'content-type')
      ) {
        done(new ApiError('unsupported_media_type', 'send exactly one Content-Type header'));
        return;
      }
      continueIfExpected(request, reply);
      done(null, payload);
    });
    app.addContentTypeParser(MERGE_PATCH, { parseAs: 'buffer', bodyLimit }, (request, body, done) => {
      if (request.method !== 'PATCH')
        done(new ApiError('unsupported_media_type', 'request body must be application/json'), undefined);
      else parseBody(request, body as Buffer, done);
    });
    app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit }, (request, body, done) =>
      parseBody(request, body as Buffer, done),
    );
  },
  { name: 'json-body', fastify: '5.x' },
);

/** A JSON body, or none where the operation takes none. */
function parseBody(
  request: FastifyRequest,
  body: Buffer,
  done: (error: Error | null, value: unknown) => void,
): void {
  // An operation that takes no body (deliverOrder) is sent none, whatever Content-Type says.
  if (body.length === 0 && request.routeOptions.schema?.body === undefined) {
    done(null, undefined);
    return;
  }
  try {
    done(null, parseJsonBody(body));
  } catch (error) {
    done(error as Error, undefined);
  }
}
