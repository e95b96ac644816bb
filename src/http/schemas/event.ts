import { type Static, Type } from 'typebox';
import { EVENT_TYPES, type EventType as EventTypeValue } from '../../domain/events.js';
import { ANY_OF_MESSAGE } from '../request/validation.js';
import { Int64, Limit, ref } from './common.js';

// Examples, as the OpenAPI document and the docs page show them; a test checks each against its schema.
export const PET_CREATED_EXAMPLE = {
  id: 1,
  type: 'pet.created',
  occurredAt: '2026-11-23T09:29:58.120Z',
  data: { id: 1, name: 'Rex', categoryId: 1, status: 'available' },
};
export const ORDER_PLACED_EXAMPLE = {
  id: 2,
  type: 'order.placed',
  occurredAt: '2026-11-23T09:30:00.000Z',
  data: { id: 1, petId: 1, status: 'placed', placedAt: '2026-11-23T09:30:00.000Z' },
};

export const EventType = Type.Unsafe<EventTypeValue>({
  $id: 'EventType',
  type: 'string',
  enum: [...EVENT_TYPES],
  description:
    'What happened: `pet.created` (data: the Pet), `order.placed`, `order.delivered`, `order.cancelled` (data: the Order), ' +
    '`webhook_endpoint.disabled` (data: the WebhookEndpoint, without its secret, as a delivery process disabled it).',
});

export const Event = Type.Object(
  {
    id: Int64({
      description:
        'Ascending in the order the changes committed; resume a feed after the last one processed.',
      minimum: 1,
    }),
    type: ref(EventType),
    occurredAt: Type.Unsafe<Date>({
      type: 'string',
      format: 'date-time',
      description: 'When the change was made: RFC 3339 in UTC, with milliseconds.',
    }),
    data: Type.Unsafe<unknown>({
      anyOf: [{ $ref: 'Pet#' }, { $ref: 'Order#' }, { $ref: 'WebhookEndpoint#' }],
      description:
        'The resource as it stood right after the change, exactly as the API returns it: a Pet for `pet.*`, an Order for `order.*`, a WebhookEndpoint for `webhook_endpoint.*`.',
    }),
  },
  {
    $id: 'Event',
    additionalProperties: false,
    description:
      'A change made through the API, or by the service itself (`webhook_endpoint.disabled`). All four fields are always present.',
    examples: [PET_CREATED_EXAMPLE],
  },
);

export const Events = Type.Array(ref(Event), {
  $id: 'Events',
  description: 'A page of events in ascending id order.',
  examples: [[PET_CREATED_EXAMPLE, ORDER_PLACED_EXAMPLE]],
});

/** The live stream as the OpenAPI document shows it: Server-Sent Events text, one message per event. */
export const EventStream = Type.String({
  description:
    'Server-Sent Events (HTML standard), kept open: first `retry: 2000`, then one message per event, `id: <event id>`, ' +
    '`event: <type>` and `data: <the Event JSON, exactly as getEvent returns it, on one line>`, in ascending id order; ' +
    'a `: keep-alive` comment at least every 15 s.',
  examples: [
    `retry: 2000\n\nid: 1\nevent: pet.created\ndata: ${JSON.stringify(PET_CREATED_EXAMPLE)}\n\n` +
      `id: 2\nevent: order.placed\ndata: ${JSON.stringify(ORDER_PLACED_EXAMPLE)}\n\n: keep-alive\n\n`,
  ],
});

export const LastEventIdHeader = Type.String({
  description:
    'Sent by an EventSource client when it reconnects: the id of the last event it received. The stream resumes ' +
    'after it (it counts as `after`, and wins over it). Only with `Accept: text/event-stream`.',
});

export const ListEventsQuery = Type.Object(
  {
    limit: Type.Optional(Limit('events')),
    type: Type.Optional(
      Type.Array(ref(EventType), {
        minItems: 1,
        maxItems: 16,
        description:
          'Only events of this type; repeat it for several (`?type=order.placed&type=order.cancelled`).',
      }),
    ),
    after: Type.Optional(
      Type.Unsafe<bigint | 'now'>({
        anyOf: [
          { type: 'integer', format: 'int64', minimum: 0 },
          { type: 'string', const: 'now' },
        ],
        default: 0,
        [ANY_OF_MESSAGE]: 'must be an event id, an integer from 0 to 2^63-1 (or now, on the live stream)',
        description:
          'Only events with a greater id: the id of the last event processed (0, the default, for all). On the live ' +
          'stream, `now` starts after the newest event committed when it opens: its first message after `retry:` is ' +
          '`id: <that id>` alone, which an EventSource client records as its last id without dispatching anything. ' +
          'The feed refuses `now` (`400`).',
      }),
    ),
  },
  { additionalProperties: false },
);

export const EventIdParams = Type.Object({
  eventId: Int64({ description: 'Identifier of the event (1 to 2^63-1).', minimum: 1 }),
});

export type ListEventsQueryValue = Static<typeof ListEventsQuery>;

/** Shared schemas, registered once with Fastify, the validator and the OpenAPI generator. */
export const EVENT_SCHEMAS = [EventType, Event, Events];
