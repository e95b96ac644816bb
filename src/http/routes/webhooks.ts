import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import { IdempotencyKeyReusedError } from '../../domain/errors.js';
import { DEFAULT_PAGE_SIZE } from '../../domain/paging.js';
import { endpointLimitMessage, type WebhookEndpoints } from '../../domain/webhook-endpoints.js';
import {
  type WebhookEndpoint as EndpointModel,
  publicEndpoint,
  type WebhookAttempt,
  type WebhookDelivery,
} from '../../domain/webhooks.js';
import { ContentEncodingHeader } from '../request/content-coding.js';
import { ApiError } from '../request/errors.js';
import { MERGE_PATCH } from '../request/json-body.js';
import { ref } from '../schemas/common.js';
import { BODY_ERRORS, errorResponse, invalid, otherErrors, response } from '../schemas/responses.js';
import {
  DeliveryParams,
  EndpointIdParams,
  ListWebhookAttemptsQuery,
  ListWebhookDeliveriesQuery,
  ListWebhookEndpointsQuery,
  NewWebhookEndpoint,
  Recovery,
  RecoveryRequest,
  WebhookAttempts,
  WebhookDeliveries,
  WebhookDelivery as WebhookDeliverySchema,
  WebhookEndpoint,
  WebhookEndpointPatch,
  WebhookEndpoints as WebhookEndpointsSchema,
  WebhookEndpointWithSecret,
} from '../schemas/webhook.js';
import { IdempotentCreateHeaders, requestIdempotencyKey } from './idempotent-create.js';
import { type Links, linkHeader } from './links.js';
import { API_ROUTES_AFTER, noBody } from './route-helpers.js';

export interface WebhookRoutesOptions {
  endpoints: WebhookEndpoints;
  links: Links;
}

const TAGS = ['webhooks'];
const NOT_FOUND = 'no webhook endpoint has this id';
const NO_DELIVERY = 'this webhook endpoint has no delivery of this event';
const notFound = errorResponse('No webhook endpoint has this id', { not_found: NOT_FOUND });
const invalidId = invalid('`endpointId` is not an integer from 1 to 2^63-1', 'endpointId must be an integer');

/** An endpoint as the API shows it: never its secrets. */
const view = publicEndpoint;

const deliveryView = (d: WebhookDelivery) => ({
  eventId: d.eventId,
  status: d.status,
  attempts: d.attempts,
  lastAttemptAt: d.lastAttemptAt?.toISOString() ?? null,
  nextAttemptAt: d.nextAttemptAt?.toISOString() ?? null,
  lastResponseStatus: d.lastResponseStatus ?? null,
  lastError: d.lastError ?? null,
});

const attemptView = (a: WebhookAttempt) => ({
  number: a.number,
  startedAt: a.startedAt.toISOString(),
  durationMs: a.durationMs,
  responseStatus: a.responseStatus ?? null,
  responseBody: a.responseBody ?? null,
  error: a.error ?? null,
  trigger: a.trigger,
});

/**
 * The instant a date-time names, its fields as written (the schema's pattern checked their form): Date
 * alone would read 2026-02-30 as March 2 and 24:00 as the next day.
 */
function instant(text: string, field: string): Date {
  const at = new Date(text);
  const [, year, month, day, hour, minute, second] =
    /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})/.exec(text) ?? [];
  const written = new Date(
    Date.UTC(Number(year), Number(month) - 1, Number(day), Number(hour), Number(minute), Number(second)),
  );
  const fieldsHold =
    written.getUTCFullYear() === Number(year) &&
    written.getUTCMonth() === Number(month) - 1 &&
    written.getUTCDate() === Number(day) &&
    written.getUTCHours() === Number(hour) &&
    written.getUTCMinutes() === Number(minute);
  if (Number.isNaN(at.getTime()) || !fieldsHold)
    throw new ApiError('invalid_request', `${field} is not a date-time that exists`);
  return at;
}

const routes: FastifyPluginAsyncTypebox<WebhookRoutesOptions> = async (app, { endpoints, links }) => {
  const found = (endpoint: EndpointModel | undefined): EndpointModel => {
    if (!endpoint) throw new ApiError('not_found', NOT_FOUND);
    return endpoint;
  };

  app.post(
    '/webhook-endpoints',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        operationId: 'createWebhookEndpoint',
        summary: 'Register a webhook endpoint',
        description:
          'From now on, every event of its `types` (all types by default) is POSTed to `url`, signed with the ' +
          'Standard Webhooks scheme. The answer carries the signing `secret`: the only time it is shown, but ' +
          'for a rotation. A `url` whose host is a literal private, loopback or link-local address is refused; ' +
          'a host name is judged on the address it resolves to, at each attempt.',
        tags: TAGS,
        headers: Type.Object({ 'content-encoding': ContentEncodingHeader }, { additionalProperties: true }),
        body: ref(NewWebhookEndpoint),
        response: {
          201: response('Endpoint registered, with its secret', ref(WebhookEndpointWithSecret), {
            Location: Type.String({ description: 'Address of the new endpoint.' }),
          }),
          400: invalid(
            'Body missing `url`, or with an invalid `url`, `types` or `description`, or unknown properties',
            'url must be an absolute http: or https: URL',
          ),
          409: errorResponse(
            'As many endpoints as `WEBHOOK_MAX_ENDPOINTS` allows (100 by default) exist already, enabled or disabled',
            { conflict: endpointLimitMessage(100) },
          ),
          default: otherErrors('GET, HEAD, POST'),
          ...BODY_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const endpoint = await endpoints.create(request.body);
      return reply
        .code(201)
        .header('Location', links.webhookEndpoint(endpoint.id))
        .send({ ...view(endpoint), secret: endpoint.secret });
    },
  );

  app.get(
    '/webhook-endpoints',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        operationId: 'listWebhookEndpoints',
        summary: 'List webhook endpoints',
        description:
          'Endpoints in ascending `id` order, paged exactly as listPets (`Link: <…>; rel="next"` while more may exist). Secrets are never listed.',
        tags: TAGS,
        querystring: ListWebhookEndpointsQuery,
        response: {
          200: response('A page of endpoints', WebhookEndpointsSchema, {
            Link: Type.String({
              description: '`<…/v1/webhook-endpoints?limit=…&cursor=…>; rel="next"` while more may exist.',
            }),
          }),
          400: invalid('Invalid `limit` or `cursor`', 'cursor is not valid'),
          default: otherErrors('GET, HEAD, POST'),
        },
      },
    },
    async (request, reply) => {
      const { limit = DEFAULT_PAGE_SIZE, cursor } = request.query;
      const page = await endpoints.list(limit, cursor);
      if (page.nextCursor)
        reply.header('Link', linkHeader(links.webhookEndpointsPage(limit, page.nextCursor), 'next'));
      return page.items.map(view);
    },
  );

  app.get(
    '/webhook-endpoints/:endpointId',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        operationId: 'getWebhookEndpoint',
        summary: 'Fetch one webhook endpoint',
        tags: TAGS,
        params: EndpointIdParams,
        response: {
          200: response('Endpoint found (without its secret)', ref(WebhookEndpoint)),
          400: invalidId,
          404: notFound,
          default: otherErrors('GET, HEAD, DELETE'),
        },
      },
    },
    async (request) => view(found(await endpoints.find(request.params.endpointId))),
  );

  app.delete(
    '/webhook-endpoints/:endpointId',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        operationId: 'deleteWebhookEndpoint',
        summary: 'Delete a webhook endpoint',
        description: 'The endpoint gets no delivery from now on; its pending deliveries are dropped.',
        tags: TAGS,
        params: EndpointIdParams,
        response: {
          204: { description: 'Deleted', type: 'null' },
          400: invalidId,
          404: notFound,
          default: otherErrors('GET, HEAD, DELETE'),
        },
      },
    },
    async (request, reply) => {
      if (!(await endpoints.delete(request.params.endpointId))) throw new ApiError('not_found', NOT_FOUND);
      return reply.code(204).send(null);
    },
  );

  app.patch(
    '/webhook-endpoints/:endpointId',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        operationId: 'updateWebhookEndpoint',
        summary: 'Change a webhook endpoint',
        description:
          'A JSON Merge Patch (RFC 7396; `application/merge-patch+json`, or `application/json`) of `url`, `types`, ' +
          "`description` and `rateLimit`; `null` restores a field's default, a field absent is left as it is, `{}` " +
          'changes nothing. The secret and the status are kept. A new `url` is checked as at creation. New `types` ' +
          'apply to the events committed from now on; a new `url` or `rateLimit` to the next attempt, pending ones too.',
        tags: TAGS,
        headers: Type.Object({ 'content-encoding': ContentEncodingHeader }, { additionalProperties: true }),
        params: EndpointIdParams,
        consumes: [MERGE_PATCH, 'application/json'],
        body: ref(WebhookEndpointPatch),
        response: {
          200: response('The endpoint, changed (without its secret)', ref(WebhookEndpoint)),
          400: invalid(
            'Invalid `endpointId`, or a body with an invalid `url`, `types`, `description` or `rateLimit`, or unknown properties',
            'url must not point to a private, loopback, link-local or otherwise non-public address',
          ),
          404: notFound,
          default: otherErrors('GET, HEAD, DELETE, PATCH'),
          ...BODY_ERRORS,
        },
      },
    },
    async (request) => view(found(await endpoints.update(request.params.endpointId, request.body))),
  );

  app.post(
    '/webhook-endpoints/:endpointId/recover',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        operationId: 'recoverWebhookEndpoint',
        summary: "Attempt an endpoint's failed deliveries again",
        description:
          'Every delivery of the endpoint that ended `failed`, for an event that occurred from `since` until `until` ' +
          '(now when absent), is attempted once more (`trigger: "recover"`; a failure ends it `failed` again, with no ' +
          'retry schedule), in event order, in batches of 100 in the background. Deliveries that succeeded are not ' +
          'sent again. One recovery at a time per endpoint: it runs until each of its deliveries has been attempted. ' +
          'With an `Idempotency-Key`, a repeat gets the first answer (`Idempotent-Replayed: true`) and starts nothing.',
        tags: TAGS,
        headers: IdempotentCreateHeaders,
        params: EndpointIdParams,
        body: ref(RecoveryRequest),
        response: {
          202: response('Recovery started: how many deliveries it attempts again', ref(Recovery), {
            'Idempotent-Replayed': Type.String({
              description: '`true` when this is the stored answer to an earlier request with the same key.',
            }),
          }),
          400: invalid(
            'Invalid `endpointId`; `since` in the future or older than the event retention; `until` not after `since`; unknown properties; or a malformed `Idempotency-Key`',
            'since must not be in the future',
          ),
          404: notFound,
          409: errorResponse('A recovery of this endpoint is under way, or the endpoint is disabled', {
            conflict: 'this webhook endpoint is disabled: enable it first',
          }),
          422: errorResponse('The `Idempotency-Key` was already used with a different endpoint or window', {
            idempotency_key_reused: new IdempotencyKeyReusedError().message,
          }),
          default: otherErrors('POST'),
          ...BODY_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const { since, until } = request.body;
      const started = await endpoints.recover(request.params.endpointId, {
        since: instant(since, 'since'),
        until: until === undefined ? undefined : instant(until, 'until'),
        caller: request.apiKeyHash,
        idempotencyKey: requestIdempotencyKey(request.headers),
      });
      if (started === undefined) throw new ApiError('not_found', NOT_FOUND);
      if (started.replayed) reply.header('Idempotent-Replayed', 'true');
      return reply.code(202).send({ queued: started.queued });
    },
  );

  app.post(
    '/webhook-endpoints/:endpointId/enable',
    {
      config: { scope: 'webhooks:write' },
      preValidation: noBody,
      schema: {
        operationId: 'enableWebhookEndpoint',
        summary: 'Enable a webhook endpoint',
        description:
          'A disabled endpoint gets deliveries again, of the events that occur from now on (not of those it missed). Enabling an enabled endpoint changes nothing. No request body.',
        tags: TAGS,
        params: EndpointIdParams,
        response: {
          200: response('The endpoint, enabled', ref(WebhookEndpoint)),
          400: invalidId,
          404: notFound,
          default: otherErrors('POST'),
        },
      },
    },
    async (request) => view(found(await endpoints.enable(request.params.endpointId))),
  );

  app.post(
    '/webhook-endpoints/:endpointId/rotate-secret',
    {
      config: { scope: 'webhooks:write' },
      preValidation: noBody,
      schema: {
        operationId: 'rotateWebhookEndpointSecret',
        summary: "Rotate a webhook endpoint's secret",
        description:
          'A new secret, shown in this answer only. For 24 hours every delivery is signed with both the new and the previous secret (two signatures in `webhook-signature`), then with the new one only. No request body.',
        tags: TAGS,
        params: EndpointIdParams,
        response: {
          200: response('The endpoint with its new secret', ref(WebhookEndpointWithSecret)),
          400: invalidId,
          404: notFound,
          default: otherErrors('POST'),
        },
      },
    },
    async (request) => {
      const endpoint = found(await endpoints.rotateSecret(request.params.endpointId));
      return { ...view(endpoint), secret: endpoint.secret };
    },
  );

  app.get(
    '/webhook-endpoints/:endpointId/deliveries',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        operationId: 'listWebhookDeliveries',
        summary: "List a webhook endpoint's deliveries",
        description:
          'One row per event for this endpoint, newest event first, optionally only those with a `status`; paged as listPets.',
        tags: TAGS,
        params: EndpointIdParams,
        querystring: ListWebhookDeliveriesQuery,
        response: {
          200: response('A page of deliveries', WebhookDeliveries, {
            Link: Type.String({
              description: '`<…/deliveries?limit=…&cursor=…>; rel="next"` while more may exist.',
            }),
          }),
          400: invalid(
            'Invalid `endpointId`, `limit`, `status` or `cursor`',
            'endpointId must be an integer',
          ),
          404: notFound,
          default: otherErrors('GET, HEAD'),
        },
      },
    },
    async (request, reply) => {
      const { endpointId } = request.params;
      const { limit = DEFAULT_PAGE_SIZE, status, cursor } = request.query;
      const page = await endpoints.deliveries(endpointId, { limit, status, cursor });
      if (!page) throw new ApiError('not_found', NOT_FOUND);
      if (page.nextCursor)
        reply.header(
          'Link',
          linkHeader(links.webhookDeliveriesPage(endpointId, limit, status, page.nextCursor), 'next'),
        );
      return page.items.map(deliveryView);
    },
  );

  app.get(
    '/webhook-endpoints/:endpointId/deliveries/:eventId/attempts',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        operationId: 'listWebhookAttempts',
        summary: "List a delivery's attempts",
        description:
          "Every attempt of one delivery, oldest first: when it began, how long it took, the receiver's status and the first 1 KiB of its answer (or why there was no answer), and what started it; paged as listPets. The request's signature and the secret are never kept. Attempts are kept as long as their event.",
        tags: TAGS,
        params: DeliveryParams,
        querystring: ListWebhookAttemptsQuery,
        response: {
          200: response('A page of attempts', WebhookAttempts, {
            Link: Type.String({
              description: '`<…/attempts?limit=…&cursor=…>; rel="next"` while more may exist.',
            }),
          }),
          400: invalid('Invalid `endpointId`, `eventId`, `limit` or `cursor`', 'eventId must be an integer'),
          404: errorResponse('No such endpoint, or it has no delivery of this event', {
            not_found: NO_DELIVERY,
          }),
          default: otherErrors('GET, HEAD'),
        },
      },
    },
    async (request, reply) => {
      const { endpointId, eventId } = request.params;
      const { limit = DEFAULT_PAGE_SIZE, cursor } = request.query;
      const page = await endpoints.attempts(endpointId, eventId, { limit, cursor });
      if (!page) throw new ApiError('not_found', NO_DELIVERY);
      if (page.nextCursor)
        reply.header(
          'Link',
          linkHeader(links.webhookAttemptsPage(endpointId, eventId, limit, page.nextCursor), 'next'),
        );
      return page.items.map(attemptView);
    },
  );

  app.post(
    '/webhook-endpoints/:endpointId/deliveries/:eventId/retry',
    {
      config: { scope: 'webhooks:write' },
      preValidation: noBody,
      schema: {
        operationId: 'retryWebhookDelivery',
        summary: 'Attempt a delivery again now',
        description:
          'A `failed` (or `succeeded`) delivery becomes `pending` and is attempted at once; a `pending` one is attempted at once instead of at its scheduled time. No request body.',
        tags: TAGS,
        params: DeliveryParams,
        response: {
          202: response('The delivery, pending', ref(WebhookDeliverySchema)),
          400: invalid(
            '`endpointId` or `eventId` is not an integer from 1 to 2^63-1',
            'eventId must be an integer',
          ),
          404: errorResponse('No such endpoint, or it has no delivery of this event', {
            not_found: NO_DELIVERY,
          }),
          default: otherErrors('POST'),
        },
      },
    },
    async (request, reply) => {
      const { endpointId, eventId } = request.params;
      const delivery = await endpoints.retry(endpointId, eventId);
      if (!delivery) throw new ApiError('not_found', NO_DELIVERY);
      return reply.code(202).send(deliveryView(delivery));
    },
  );
};

/** Webhook endpoints and their deliveries, behind authentication and rate limits. */
export const webhookRoutes = fp(routes, {
  name: 'webhook-routes',
  fastify: '5.x',
  dependencies: API_ROUTES_AFTER,
});
