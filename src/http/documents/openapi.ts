import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { OpenAPIV3_1 } from 'openapi-types';
import { Type } from 'typebox';
import { EVENT_TYPES } from '../../domain/events.js';
import { response } from '../schemas/responses.js';
import { FIXED_ANSWER_HEADERS, FixedAnswer, NotModified } from './fixed-answer.js';

export interface OpenApiOptions {
  publicBaseUrl: string | undefined;
  stagingBaseUrl: string | undefined;
  /** Whether /v1/openapi.json is served (not by a delivery process); true when absent. */
  serveDocument?: boolean;
}

/**
 * The OpenAPI 3.1 document, generated from the routes' own schemas, so it cannot drift from what the
 * service does. Must be registered before the routes it describes.
 */
export const openApi = fp(
  async (app: FastifyInstance, options: OpenApiOptions) => {
    // docs/api.md: the serving instance first, so a docs page's "try it" calls the service that serves it.
    const servers = [{ url: '/v1', description: 'This instance' }];
    if (options.publicBaseUrl) servers.push({ url: options.publicBaseUrl, description: 'Production' });
    if (options.stagingBaseUrl) servers.push({ url: options.stagingBaseUrl, description: 'Staging' });

    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'Animal store service',
          version: '1.0.0',
          description: [
            'Lists, adds and fetches animals (**pets**), and orders them (**store**). Every operation needs an API key',
            'sent as `Authorization: Bearer <key>`.',
            '',
            '**Scopes.** Each key has scopes (`pets:read`, `pets:write`, `orders:read`, `orders:write`); each operation',
            "names the one it needs in its security requirement and description (a `GET` its group's `:read`, the",
            'others its `:write`). A valid key without it gets `403 forbidden` with',
            '`WWW-Authenticate: Bearer realm="animal-store", error="insufficient_scope", scope="…"`, before the request',
            'is validated. An expired or revoked key is `401` like an unknown one.',
            '',
            "**Orders.** An animal's status is set when it is created and afterwards changes only through its orders:",
            'placing an order takes an `available` animal to `pending`, delivering it makes the animal `sold`, cancelling',
            'it makes the animal `available` again, each in one transaction with the order. Of concurrent orders for',
            'one animal exactly one succeeds; the others are `409 conflict`.',
            '',
            '**Paging.** `GET /pets` and `GET /store/orders` are keyset-paged in ascending `id` order. While more may',
            'exist the response carries `Link: <…>; rel="next"` (RFC 8288); follow it verbatim. The cursor inside is',
            'opaque and signed: an altered one, or one used with different filters or on the other list, is a 400.',
            '',
            '**Errors.** Every error is `{code, message, status}`; `code` is one of a closed list, `status` repeats',
            'the HTTP status, and a 400 names every offending field. Unknown paths are 404, wrong methods 405',
            'with `Allow`.',
            '',
            '**Integers.** `id`, `categoryId` and `petId` are int64 and exact end to end, also beyond 2^53: parse them with',
            'a big-integer-aware JSON reader. In requests they must be integer literals (`1`, not `1.0` or `"1"`).',
            '',
            '**Retries.** `createPet` and `placeOrder` take an `Idempotency-Key`: within 24 hours the same key and body',
            'return the first `201` again, changing nothing; the same key with another body is a 422. `deliverOrder`',
            'and `cancelOrder` are safe to retry as they are: asked again, they answer the order unchanged.',
            '',
            '**Limits.** Each API key has a token bucket; beyond it, 429 with `Retry-After`. Responses carry',
            '`RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers). An overloaded node answers',
            '503 with `Retry-After` at once.',
            '',
            '**Content codings.** A request body may be sent with `Content-Encoding: gzip`, `deflate` or `br`; the',
            'body limit applies to its decoded size. A response of 1 KiB or more is compressed when `Accept-Encoding`',
            'allows (gzip preferred, then br, then deflate).',
            '',
            '**Conditional requests.** Every `200` of a GET carries a strong `ETag` (a digest of the bytes before any',
            "content coding and of a page's `next` link; `-gzip`, `-br` or `-deflate` appended for a compressed answer) and",
            '`Cache-Control: private, no-cache`. Send it back in `If-None-Match` (`*`, a list, weak comparison,',
            'either form) to get `304` and no body while it is current. A `304` needs the key and the scope and',
            'counts against the rate limit.',
            '',
            '**Events and webhooks.** Every change (`pet.created`, `order.placed`, `order.delivered`, `order.cancelled`)',
            'is recorded in the transaction that makes it. `GET /events?after=<last id>` lists them in commit order and',
            'never skips one. A webhook endpoint gets each event of its types as a POST signed with the Standard',
            'Webhooks scheme (`webhook-id`, `webhook-timestamp`, `webhook-signature`), retried on failure after 5 s, 5 min,',
            '30 min, 2 h, 5 h, 10 h and 10 h (±20%), at least once; see `webhooks` below for each delivery.',
            '',
            '**Deprecation.** `getPet` is deprecated and is removed on Thu, 05 Dec 2030 00:00:00 GMT; from then',
            'on it answers 410. Use `GET /pets?id=…` instead (`?id=3&id=17`: up to 100 animals at once).',
          ].join('\n'),
        },
        servers,
        tags: [
          { name: 'pets', description: 'The animals in the store' },
          {
            name: 'store',
            description:
              "Orders for the animals: placing, delivering and cancelling one moves its animal's status with it",
          },
          {
            name: 'events',
            description: 'Every change made through the API, as a feed that never skips one',
          },
          {
            name: 'webhooks',
            description: 'Endpoints that receive each event as a signed POST, retried until it succeeds',
          },
          { name: 'operations', description: 'Probes and the contract itself; no key needed' },
        ],
        webhooks: webhookDeliveries(),
        components: {
          securitySchemes: {
            bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key, e.g. `pst_…`.' },
          },
        },
        security: [{ bearerAuth: [] }],
      },
      refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
      transform: ({ schema, url }) => ({ schema: schema && liftResponseExamples(schema), url }),
    });

    // A delivery process (--role deliver) serves no API, so no document of one.
    if (options.serveDocument === false) return;
    // Built on its first request, when every route is known; it cannot change after that.
    let document: FixedAnswer | undefined;
    app.get(
      '/v1/openapi.json',
      {
        compress: false, // FixedAnswer compresses it, once
        schema: {
          operationId: 'openapi',
          summary: 'This OpenAPI document',
          tags: ['operations'],
          security: [],
          response: {
            200: response(
              'The OpenAPI 3.1 document',
              Type.Object(
                {},
                {
                  additionalProperties: true,
                  // Abridged: the document begins so, and goes on with paths and components.
                  examples: [{ openapi: '3.1.0', info: { title: 'Animal store service', version: '1.0.0' } }],
                },
              ),
              FIXED_ANSWER_HEADERS,
            ),
            304: NotModified,
          },
        },
      },
      (request, reply) => {
        document ??= new FixedAnswer(JSON.stringify(app.swagger()), 'application/json; charset=utf-8');
        return document.send(request, reply);
      },
    );
  },
  { name: 'openapi', fastify: '5.x' },
);

/**
 * OpenAPI 3.1's top-level `webhooks`: what a receiver gets for each event type, as a request the service
 * makes to the endpoint's URL, and what the service makes of the answer.
 */
function webhookDeliveries(): Record<string, OpenAPIV3_1.PathItemObject> {
  const header = (name: string, description: string, example: string): OpenAPIV3_1.ParameterObject => ({
    name,
    in: 'header',
    required: true,
    description,
    schema: { type: 'string' },
    example,
  });
  const parameters = [
    header(
      'webhook-id',
      "The event's id, in decimal digits: the same on every attempt; de-duplicate on it.",
      '1',
    ),
    header('webhook-timestamp', 'Unix seconds of this attempt.', '1795426198'),
    header(
      'webhook-signature',
      '`v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` keyed with the decoded secret; two, space-separated, for 24 hours after a rotation. Verify with any Standard Webhooks library.',
      'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
    ),
  ];
  return Object.fromEntries(
    EVENT_TYPES.map((type): [string, OpenAPIV3_1.PathItemObject] => [
      type,
      {
        post: {
          operationId: `${type.replace('.', '_')}_webhook`,
          summary: `Delivery of a ${type} event`,
          description:
            'POSTed to every enabled endpoint whose `types` include it. A 2xx within `WEBHOOK_TIMEOUT_MS` (10 s) ' +
            'is success; anything else (another status, a redirect, which is never followed, a timeout, a refused or ' +
            'reset connection) is retried on the schedule, then the delivery is `failed`. A 410 disables the endpoint.',
          tags: ['webhooks'],
          parameters,
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Event' } } },
          },
          responses: {
            '2XX': { description: 'Received: the delivery succeeded' },
            '410': { description: 'Gone: the endpoint is disabled at once (`disabledReason: "gone"`)' },
            default: { description: 'Any other answer: the delivery is tried again later' },
          },
        },
      },
    ]),
  );
}
type Json = Record<string, unknown>;

/**
 * Moves the examples of a response whose schema is a `$ref` (an Error), or of each of its media types'
 * schemas, onto the media type, where OpenAPI puts them: @fastify/swagger drops every keyword beside a
 * `$ref`, and leaves a media type's schema as it is. Only the document changes;
 * the route's own schema, which serialises replies, is left as it is.
 */
function liftResponseExamples<T extends object>(schema: T): T {
  const responses = (schema as { response?: Record<string, Json> }).response;
  if (!responses) return schema;
  const lifted = Object.entries(responses).map(([status, response]) => {
    const { $ref, examples, 'x-examples': named, description, headers, content } = response;
    // One media type per content type (listEvents' feed and stream): each schema's example onto its own.
    if (content) {
      const media = Object.entries(content as Record<string, { schema: Json }>).map(([type, { schema }]) => {
        const { examples: own, ...rest } = schema;
        return [type, own ? { schema: rest, example: (own as unknown[])[0] } : { schema }];
      });
      return [status, { ...response, content: Object.fromEntries(media) }];
    }
    if ($ref === undefined || (examples === undefined && named === undefined)) return [status, response];
    const media = named ? { examples: named } : { example: (examples as unknown[])[0] };
    return [
      status,
      { description, headers, content: { 'application/json': { schema: { $ref }, ...media } } },
    ];
  });
  return { ...schema, response: Object.fromEntries(lifted) };
}
