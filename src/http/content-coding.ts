import compress from '@fastify/compress';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Type } from 'typebox';

/** DECISIONS.md: the request body codings decoded before parsing; any other is 415. */
const REQUEST_CODINGS = ['gzip', 'deflate', 'br'] as const;

/** Sent with a 415 for a coding (RFC 9110 §12.5.3): the codings that would have been accepted. */
export const ACCEPTED_REQUEST_CODINGS = REQUEST_CODINGS.join(', ');

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

/**
 * Content codings, both ways, through @fastify/compress (the Fastify team's plugin):
 * - request bodies in gzip, deflate or br are decoded before the JSON parser sees them. The body limit
 *   applies to the decoded bytes too: Fastify counts what the decoding stream yields, so a small body
 *   that inflates past it is 413 and is not inflated further. Any other coding is 415 and a body that
 *   does not decode 415 as well; both become the Error body in errors.ts, with Accept-Encoding.
 * - responses of COMPRESS_THRESHOLD_BYTES or more are compressed when the client's Accept-Encoding
 *   allows: gzip first (as small as br at level 4 here, for less CPU), then br, then deflate.
 * Must be registered before the routes: it attaches its hooks to each route as it is added.
 */
export const contentCodings = fp(
  async (app: FastifyInstance) => {
    await app.register(compress, {
      global: true,
      requestEncodings: [...REQUEST_CODINGS, 'identity'],
      encodings: ['gzip', 'br', 'deflate'],
      threshold: COMPRESS_THRESHOLD_BYTES,
    });
    // Content codings are case-insensitive (RFC 9110 §8.4.1); the plugin compares them as written.
    // A root hook runs before the plugin's, which it adds to each route.
    app.addHook('preParsing', (request, _reply, payload, done) => {
      const coding = request.headers['content-encoding'];
      if (coding !== undefined) request.headers['content-encoding'] = coding.toLowerCase();
      done(null, payload);
    });
  },
  // After json-body: a repeated Content-Type is refused, and 100 Continue sent, before any decoding.
  { name: 'content-codings', fastify: '5.x', dependencies: ['json-body'] },
);
