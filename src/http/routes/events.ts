import negotiate from '@fastify/accept-negotiator';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import type { EventFeed } from '../../domain/event-feed.js';
import { type EventType, eventJson } from '../../domain/events.js';
import { DEFAULT_PAGE_SIZE } from '../../domain/paging.js';
import { INT64_MAX } from '../../domain/pet.js';
import { ApiError } from '../request/errors.js';
import { ref } from '../schemas/common.js';
import {
  Event,
  EventIdParams,
  EventStream,
  Events,
  LastEventIdHeader,
  ListEventsQuery,
} from '../schemas/event.js';
import { errorResponse, invalid, otherErrors, response } from '../schemas/responses.js';
import type { EventStreams } from './event-stream.js';
import { type Links, linkHeader } from './links.js';
import { repeatable, sendJson } from './route-helpers.js';

export interface EventRoutesOptions {
  feed: EventFeed;
  links: Links;
  /** The live streams: listEvents asked for `text/event-stream`. */
  streams: EventStreams;
}

/** The media types listEvents answers in, the feed first: a client must ask for the stream by name. */
const MEDIA_TYPES = ['application/json', 'text/event-stream'];

/** `Last-Event-ID` as an event id; undefined when absent or empty (EventSource sends none before an id). */
function lastEventId(value: string | string[] | undefined): bigint | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value === 'string' && /^\d{1,19}$/.test(value) && BigInt(value) <= INT64_MAX)
    return BigInt(value);
  throw new ApiError('invalid_request', 'Last-Event-ID must be an event id, an integer from 0 to 2^63-1');
}

const TAGS = ['events'];
const NOT_FOUND = 'no event has this id';

const routes: FastifyPluginAsyncTypebox<EventRoutesOptions> = async (app, { feed, links, streams }) => {
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
          '`Link: <…>; rel="next"`. The body is a bare array. Events are kept `EVENT_RETENTION_DAYS` (30 by default).\n\n' +
          '**The live stream.** Asked with `Accept: text/event-stream` (what an EventSource client sends), the answer is ' +
          'the same events as Server-Sent Events, kept open: those after `after` (or after `Last-Event-ID`, which wins; ' +
          '`after=now` starts after the newest event, sending its id first as a message of its own), ' +
          'then each one as it commits, on whichever node, in ascending id order, none skipped and none twice. A client ' +
          'that reconnects with the last id it received misses nothing. `limit` is refused there (`400`). A client that ' +
          'stops reading is disconnected once `EVENT_STREAM_BUFFER_BYTES` (1 MiB) wait unsent; a key may keep ' +
          '`EVENT_STREAM_MAX_PER_KEY` (10) streams open on a node (`429` beyond); a node shutting down ends its streams, ' +
          'and the client reconnects (`503` from a node that is shutting down).',
        tags: TAGS,
        querystring: ListEventsQuery,
        headers: Type.Object({ 'last-event-id': Type.Optional(LastEventIdHeader) }),
        response: {
          200: Type.Unsafe({
            description: 'A page of events; or, asked for `text/event-stream`, the live stream',
            headers: {
              Link: Type.String({
                description: '`<…/v1/events?limit=…&after=…>; rel="next"` while more events may exist.',
              }),
            },
            content: {
              'application/json': { schema: response('A page of events', Events) },
              'text/event-stream': { schema: EventStream },
            },
          }),
          400: invalid(
            'Invalid `limit`, `type` or `after` (`after=now` on the feed); on a stream, `limit` or a malformed `Last-Event-ID`',
            'after must be an integer from 0 to 2^63-1',
          ),
          default: otherErrors('GET, HEAD'),
        },
      },
    },
    async (request, reply) => {
      const { limit = DEFAULT_PAGE_SIZE, after = 0n } = request.query;
      const types = (request.query.type ?? []) as EventType[];
      if (
        request.method === 'GET' &&
        negotiate(request.headers.accept ?? '', MEDIA_TYPES) === MEDIA_TYPES[1]
      ) {
        // The query as sent: validation has filled in limit's default.
        if (new URLSearchParams(request.url.slice(request.url.indexOf('?') + 1)).has('limit'))
          throw new ApiError(
            'invalid_request',
            'limit does not apply to a stream, which sends every event: leave it out',
          );
        const resume = lastEventId(request.headers['last-event-id']);
        await streams.open(request, reply, { after: resume ?? after, types: [...new Set(types)] });
        return;
      }
      if (after === 'now')
        throw new ApiError(
          'invalid_request',
          'after=now applies to the live stream (Accept: text/event-stream); the feed takes an event id',
        );
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
