import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, onSendHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { type TSchema, Type } from 'typebox';
import { digestOf, matchingTag } from './entity-tags.js';

/**
 * Conditional GETs (RFC 9110 §8.8.3, §13.1.2, §15.4.5) on every operation registered after this: each
 * `200` of a GET (and HEAD) carries a strong `ETag`, the digest of the bytes of the representation (and
 * of its `Link: rel="next"` header), and
 * `Cache-Control: private, no-cache` (answers that need a key are no shared cache's business, and a
 * private one must ask again each time: with the tag, that costs a `304` and no body). An
 * `If-None-Match` that names the tag (`*`, a list, weak comparison) gets `304 Not Modified`, no body.
 *
 * The check runs at onSend, once the handler has answered: authentication, the scope and the rate limit
 * have all been applied, so a `304` needs the key and the scope and counts against the limit like a
 * `200`, and the database is read as for a `200` (what saves is the body not sent).
 *
 * A compressed answer is another representation, so its strong tag differs: `"<digest>-gzip"` (or
 * `-br`, `-deflate`) beside the identity answer's `"<digest>"`, the digest always that of the
 * uncompressed bytes. If-None-Match accepts either form for the same content, as Apache's mod_deflate
 * does: a client whose Accept-Encoding changed still has the same data. The `304` carries the tag the
 * client sent that matched (so its cache finds the stored answer to refresh), or, for `*`, the
 * identity answer's.
 */

/** The content codings @fastify/compress may apply (content-coding.ts), as a tag's suffix. */
const CODING_SUFFIX = /-(gzip|br|deflate)"$/;

export const CACHE_CONTROL = 'private, no-cache';

const ETagHeader = Type.String({
  description:
    'A strong entity tag of this representation (a digest of its bytes and of its `Link: rel="next"`): ' +
    '`"<digest>"`, or `"<digest>-gzip"` (`-br`, `-deflate`) when compressed. Send it back in `If-None-Match` ' +
    'to get `304` while it is current.',
});
const CacheControlHeader = Type.String({
  description:
    '`private, no-cache`: the answer needs a key, so no shared cache keeps it; a private cache asks again ' +
    'each time, with `If-None-Match`.',
});
/** The request header, as the OpenAPI document describes it. */
const IfNoneMatchHeader = Type.String({
  description:
    'The `ETag`s of copies the client holds (a comma-separated list, or `*`), compared weakly: when one is ' +
    "the current representation's, the answer is `304` and no body. A malformed value matches nothing.",
});
const NotModified = Type.Unsafe({
  type: 'null',
  description:
    "Not Modified: `If-None-Match` named the current representation's `ETag`, so the client's copy is current; no body. " +
    'It needs the key and the scope, and counts against the rate limit, like a `200`.',
  headers: { ETag: ETagHeader, 'Cache-Control': CacheControlHeader },
});

declare module 'fastify' {
  interface FastifyReply {
    /** The digest of the 200 being sent: its ETag names its coding once compression has decided. */
    entityDigest?: string;
  }
}

/** Before compression: the tag of the bytes, and the 304 when If-None-Match names it. */
const tagAndCheck: onSendHookHandler<unknown> = (request, reply, payload, done) => {
  if (
    reply.statusCode !== 200 ||
    (request.method !== 'GET' && request.method !== 'HEAD') ||
    (typeof payload !== 'string' && !Buffer.isBuffer(payload))
  ) {
    done(null, payload);
    return;
  }
  // A page's `next` link is part of what it says: a full last page that gains a next page is the same
  // bytes with a new link, and a client holding the old one must not be told it is current. (getPet's
  // deprecation link, the same on every answer, is set later and not counted.)
  const link = reply.getHeader('Link');
  const digest = typeof link === 'string' ? digestOf(payload, link) : digestOf(payload);
  const identityTag = `"${digest}"`;
  reply.entityDigest = digest;
  reply.header('Cache-Control', CACHE_CONTROL).header('ETag', identityTag);
  const matched = matchingTag(
    request.headers['if-none-match'],
    (tag) => tag.replace(CODING_SUFFIX, '"') === identityTag,
  );
  if (matched === undefined) {
    done(null, payload);
    return;
  }
  notModified(reply, matched === '*' ? identityTag : matched);
  // No body and no Content-Length (a 304's would have to be the 200's, RFC 9110 §8.6): null, not ''.
  // A HEAD route's own last hook (Fastify's) cannot take null; an empty stream it drains, leaving none.
  done(null, request.method === 'HEAD' ? Readable.from([]) : null);
};

function notModified(reply: FastifyReply, etag: string): void {
  reply.entityDigest = undefined;
  reply.code(304).header('ETag', etag).removeHeader('Content-Type');
  // The compressed answer it stands for varies with Accept-Encoding, as that 200 says.
  if (CODING_SUFFIX.test(etag)) reply.header('Vary', 'Accept-Encoding');
}

/** After compression: a compressed answer's tag names its coding. */
const tagCoding: onSendHookHandler<unknown> = (_request, reply, payload, done) => {
  const coding = reply.getHeader('Content-Encoding');
  if (reply.entityDigest !== undefined && typeof coding === 'string' && coding !== 'identity')
    reply.header('ETag', `"${reply.entityDigest}-${coding}"`);
  done(null, payload);
};

export const conditionalRequests = fp(
  async (app: FastifyInstance) => {
    app.decorateReply('entityDigest', undefined);
    app.addHook('onRoute', (route) => {
      const methods = [route.method].flat();
      const own = route.schema?.response as Record<string, { headers?: object }> | undefined;
      if (!methods.includes('GET') || !own?.[200]) return;
      // Route-level: after the compression plugin's own onSend, which content-coding.ts added first.
      route.onSend = [...[route.onSend ?? []].flat(), tagCoding];
      // The route's own headers (listEvents' Last-Event-ID) stay beside If-None-Match.
      const ownHeaders = (route.schema?.headers as { properties?: Record<string, TSchema> } | undefined)
        ?.properties;
      route.schema = {
        ...route.schema,
        headers: Type.Object(
          { ...ownHeaders, 'if-none-match': Type.Optional(IfNoneMatchHeader) },
          { additionalProperties: true },
        ),
        response: {
          ...own,
          200: {
            ...own[200],
            headers: { ...own[200].headers, ETag: ETagHeader, 'Cache-Control': CacheControlHeader },
          },
          304: NotModified,
        },
      };
    });
    app.addHook('onSend', tagAndCheck);
  },
  // After the rate limit: its answer comes first, and a 304 is counted like any answer.
  { name: 'conditional-requests', fastify: '5.x', dependencies: ['rate-limit', 'content-codings'] },
);
