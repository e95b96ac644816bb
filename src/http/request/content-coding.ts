import type { IncomingMessage, ServerResponse } from 'node:http';
import { PassThrough, type Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import compress from '@fastify/compress';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import { ApiError } from './errors.js';

/** The request body codings decoded before parsing; any other is 415. */
const DECODERS: Readonly<Record<string, () => Transform>> = {
  gzip: createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/** Sent with a 415 for a coding (RFC 9110 §12.5.3): the codings that would have been accepted. */
export const ACCEPTED_REQUEST_CODINGS = Object.keys(DECODERS).join(', ');

const refused = (message: string) =>
  new ApiError('unsupported_media_type', message, { 'Accept-Encoding': ACCEPTED_REQUEST_CODINGS });

/** The request header, as the OpenAPI document describes it. */
export const ContentEncodingHeader = Type.Optional(
  Type.String({
    description:
      "The body's content coding: `gzip`, `deflate` or `br` (or `identity`, or none). A coded body is decoded " +
      'before parsing, and the body limit applies to its decoded size too (`413`). Any other coding, or a ' +
      'body that does not decode, is `415` with `Accept-Encoding: gzip, deflate, br`.',
  }),
);

/**
 * Responses smaller than this go out as they are. Compressing costs 10 to 30 µs of CPU whatever the
 * size (a 20-pet page, 1.4 KB → 280 B: 11 µs; a 100-pet page, 7 KB → 850 B: 27 µs; gzip on the
 * benchmark machine), and below 1 KiB a response with its head already fits one TCP segment
 * (1460 B), so compressing it would spend that CPU to save no packet and no round trip.
 */
const COMPRESS_THRESHOLD_BYTES = 1024;

/** Methods whose body Fastify reads (its `bodywith` list); no other request's body is ever parsed. */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** True for the one media type that has a parser (json-body.ts): `application/json`, any parameters. */
function isJson(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const end = contentType.indexOf(';');
  return (end === -1 ? contentType : contentType.slice(0, end)).trim().toLowerCase() === 'application/json';
}

/** What Fastify's body reader consumes; it compares `receivedEncodedLength` with Content-Length. */
type DecodedBody = PassThrough & { receivedEncodedLength: number };

/**
 * Decodes `raw` into the stream Fastify's body reader then consumes. Once the answer is handed to
 * the socket (or the connection is gone), whatever state the body is in, the decoder is destroyed and
 * the rest of the body is read and thrown away, as Node does with a body nobody read. Without that, a
 * decoder nobody reads any more (the body reader stops at the limit: 413) holds the connection
 * paused, so the next request on it is never read, and a compressed body keeps inflating after the
 * answer (796 bytes of brotli: 2 CPU-s).
 */
function decode(raw: IncomingMessage, response: ServerResponse, decoder: Transform): DecodedBody {
  const body = new PassThrough() as DecodedBody;
  body.receivedEncodedLength = 0;
  const countWireBytes = (chunk: Buffer) => {
    body.receivedEncodedLength += chunk.length;
  };
  raw.on('data', countWireBytes);
  // Listeners for good: a write into a destroyed decoder, or an error after the body reader has
  // stopped listening, must not become an uncaught exception.
  decoder.on('error', () =>
    body.destroy(refused('request body does not decode as its Content-Encoding says')),
  );
  body.on('error', () => {});
  // Not stream.pipeline: it would destroy the request, and so the socket, with the decoder.
  raw.pipe(decoder).pipe(body);
  const tearDown = () => {
    raw.removeListener('data', countWireBytes);
    raw.unpipe(decoder);
    decoder.destroy();
    body.destroy();
    if (!raw.complete) raw.resume();
  };
  response.once('finish', tearDown);
  response.once('close', tearDown);
  return body;
}

/**
 * Content codings, both ways:
 * - request bodies in gzip, deflate or br are decoded before the JSON parser sees them, and only when
 *   it will: a request whose method carries no body (GET, HEAD), or whose Content-Type has no parser
 *   (415), gets no decoder, so its body stays unread and Node discards it after the answer. The body
 *   limit applies to the decoded bytes too: Fastify counts what the decoder yields, so a small body
 *   that inflates past it is 413. Any other coding is 415 before anything is read, and a body that
 *   does not decode is 415 as well; both with Accept-Encoding. A GET's or HEAD's coding is not looked at.
 * - responses of COMPRESS_THRESHOLD_BYTES or more are compressed when the client's Accept-Encoding
 *   allows: gzip first (as small as br at level 4 here, for less CPU), then br, then deflate, through
 *   @fastify/compress (the Fastify team's plugin). Its request decoding is not used: it starts
 *   decoding before Fastify has decided whether the body will be read at all.
 * Must be registered before the routes: the plugin attaches its hooks to each route as it is added.
 */
export const contentCodings = fp(
  async (app: FastifyInstance) => {
    await app.register(compress, {
      global: true,
      globalDecompression: false,
      encodings: ['gzip', 'br', 'deflate'],
      threshold: COMPRESS_THRESHOLD_BYTES,
    });
    app.addHook('preParsing', (request, reply, payload, done) => {
      const header = request.headers['content-encoding'];
      if (header === undefined) {
        done(null, payload);
        return;
      }
      // Content codings are case-insensitive (RFC 9110 §8.4.1).
      const coding = header.toLowerCase();
      const makeDecoder = DECODERS[coding];
      if (!BODY_METHODS.has(request.method)) {
        done(null, payload); // a GET's or HEAD's body is never read, whatever its coding
      } else if (makeDecoder === undefined && coding !== 'identity') {
        // An unknown path or method is 404 or 405 whatever the body: it is never parsed.
        if (request.is404) done(null, payload);
        else done(refused('Content-Encoding must be gzip, deflate, br or identity'));
      } else if (makeDecoder === undefined || !isJson(request.headers['content-type'])) {
        done(null, payload);
      } else {
        done(null, decode(request.raw, reply.raw, makeDecoder()));
      }
    });
  },
  // After json-body: a repeated Content-Type is refused, and 100 Continue sent, before any decoding.
  { name: 'content-codings', fastify: '5.x', dependencies: ['json-body'] },
);
