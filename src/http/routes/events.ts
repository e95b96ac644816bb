import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import type { EventFeed } from '../../domain/event-feed.js';
import { type EventType, eventJson } from '../../domain/events.js';
import { DEFAULT_PAGE_SIZE } from '../../domain/paging.js';
import { ApiError } from '../errors.js';
import { type Links, linkHeader } from '../links.js';
import { ref } from '../schemas/common.js';
import { Event, EventIdParams, Events, ListEventsQuery } from '../schemas/event.js';
import { errorResponse, invalid, otherErrors, response } from '../schemas/responses.js';
import { repeatable, sendJson } from './route-helpers.js';

export interface EventRoutesOptions {
  feed: EventFeed;
  links: Links;
}

const TAGS = ['events'];
const NOT_FOUND = 'no event has this id';

const routes: FastifyPluginAsyncTypebox<EventRoutesOptions> = async (app, { feed, links }) => {
  app.get(
    '/events',
    {
      config: { scope: 'events:read' },
      preValidation: repeatable('type'),
      schema: {
        operationId: 'listEvents',
        summary: 'List events',
        description:
          'Every change made through the API, in ascending `id` order (the order the changes committed), at most ' +
          '`limit`, optionally only some `type`s (repeat the parameter), only after the id given in `after`. ' +
          'A consumer that repeats `GET /v1/events?after=<the last id it processed>` sees every event exactly ' +
          'once, in order, however many nodes write: an event is listed only once every event with a smaller ' +
          'id is listed too or can no longer appear. While more may exist the response carries ' +
          '`Link: <…>; rel="next"`. The body is a bare array. Events are kept `EVENT_RETENTION_DAYS` (30 by default).',
        tags: TAGS,
        querystring: ListEventsQuery,
        response: {
          200: response('A page of events', Events, {
            Link: Type.String({
              description: '`<…/v1/events?limit=…&after=…>; rel="next"` while more events may exist.',
            }),
          }),
          400: invalid('Invalid `limit`, `type` or `after`', 'after must be an integer from 0 to 2^63-1'),
          default: otherErrors('GET, HEAD'),
        },
      },
    },
    async (request, reply) => {
      const { limit = DEFAULT_PAGE_SIZE, after = 0n } = request.query;
      const types = (request.query.type ?? []) as EventType[];
      const page = await feed.list({ after, types, limit });
      if (page.nextAfter !== undefined)
        reply.header(
          'Link',
          linkHeader(links.eventsPage(limit, [...new Set(types)], page.nextAfter), 'next'),
        );
      return sendJson(reply, `[${page.events.map(eventJson).join(',')}]`);
    },
  );

  app.get(
    '/events/:eventId',
    {
      config: { scope: 'events:read' },
      schema: {
        operationId: 'getEvent',
        summary: 'Fetch one event',
        tags: TAGS,
        params: EventIdParams,
        response: {
          200: response('Event found', ref(Event)),
          400: invalid('`eventId` is not an integer from 1 to 2^63-1', 'eventId must be an integer'),
          404: errorResponse('No event has this id (or it is older than the retention)', {
            not_found: NOT_FOUND,
          }),
          default: otherErrors('GET, HEAD'),
        },
      },
    },
    async (request, reply) => {
      const event = await feed.find(request.params.eventId);
      if (!event) throw new ApiError('not_found', NOT_FOUND);
      return sendJson(reply, eventJson(event));
    },
  );
};

/** The event feed, behind authentication and rate limits, described in the OpenAPI document. */
export const eventRoutes = fp(routes, {
  name: 'event-routes',
  fastify: '5.x',
  dependencies: ['authentication', 'scopes', 'rate-limit', 'route-fallbacks', 'openapi'],
});
