import { Type } from 'typebox';
import {
  ATTEMPT_TRIGGERS,
  MAX_DESCRIPTION_LENGTH,
  MAX_RATE_LIMIT,
  MAX_URL_LENGTH,
  WEBHOOK_DELIVERY_STATUSES,
} from '../../domain/webhooks.js';
import { ANY_OF_MESSAGE, PATTERN_MESSAGE } from '../request/validation.js';
import { Cursor, Int64, Limit, ref } from './common.js';

const ENDPOINT_EXAMPLE = {
  id: 1,
  url: 'https://hooks.example.com/animal-store',
  types: ['order.placed', 'order.delivered'],
  description: 'Fulfilment',
  rateLimit: null,
  status: 'enabled',
  createdAt: '2026-11-23T09:00:00.000Z',
  lastSuccessAt: '2026-11-23T09:30:00.212Z',
  failingSince: null,
};
const SECRET_EXAMPLE = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw4KNu3SuWdKo=';
const DELIVERY_EXAMPLE = {
  eventId: 2,
  status: 'pending',
  attempts: 1,
  lastAttemptAt: '2026-11-23T09:30:00.210Z',
  nextAttemptAt: '2026-11-23T09:30:05.380Z',
  lastResponseStatus: 503,
  lastError: 'HTTP 503: try later',
};

const DateTime = (description: string) =>
  Type.Unsafe<Date>({ type: 'string', format: 'date-time', description });
const Nullable = (schema: object, description: string) =>
  Type.Unsafe({ anyOf: [schema, { type: 'null' }], description });

const RATE_LIMIT_DESCRIPTION =
  'Deliveries a second at most, every delivery process together (1 to 10,000); after a quiet spell one ' +
  "second's worth may go at once. `null`: no limit.";
/** `rateLimit` as a request sets it: an integer in range, or null for none. */
const RateLimitValue = (description: string) =>
  Type.Union([Type.Integer({ minimum: 1, maximum: MAX_RATE_LIMIT }), Type.Null()], {
    description,
    [ANY_OF_MESSAGE]: `must be an integer from 1 to ${MAX_RATE_LIMIT}, or null`,
  });

const Types = Type.Array(
  Type.Unsafe<string>({ anyOf: [{ $ref: 'EventType#' }, { type: 'string', const: '*' }] }),
  {
    minItems: 1,
    maxItems: 16,
    description: 'The event types this endpoint receives, or `["*"]` for every type, now and later.',
  },
);

export const NewWebhookEndpoint = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: MAX_URL_LENGTH,
      description:
        'Where deliveries are POSTed: an absolute `https:` (or `http:`) URL without user info or fragment, at most 2,048 characters. It must reach a public address.',
    }),
    types: Type.Optional(Types),
    description: Type.Optional(
      Type.String({
        maxLength: MAX_DESCRIPTION_LENGTH,
        description: 'Up to 255 characters; `""` when absent.',
      }),
    ),
    rateLimit: Type.Optional(RateLimitValue(`${RATE_LIMIT_DESCRIPTION} Absent: no limit.`)),
  },
  {
    $id: 'NewWebhookEndpoint',
    additionalProperties: false,
    description: 'The request body for registering a webhook endpoint. Any other property is refused.',
    examples: [{ url: ENDPOINT_EXAMPLE.url, types: ENDPOINT_EXAMPLE.types, description: 'Fulfilment' }],
  },
);

const endpointProperties = {
  id: Int64({ description: 'Unique identifier, assigned by the service.', minimum: 1 }),
  url: Type.String({ description: 'Where deliveries are POSTed.' }),
  types: Types,
  description: Type.String({ description: 'What the endpoint is for.' }),
  rateLimit: Nullable({ type: 'integer', minimum: 1, maximum: MAX_RATE_LIMIT }, RATE_LIMIT_DESCRIPTION),
  status: Type.Unsafe<'enabled' | 'disabled'>({
    type: 'string',
    enum: ['enabled', 'disabled'],
    description: '`enabled`: gets deliveries. `disabled`: gets none until enabled again.',
  }),
  disabledReason: Type.Optional(
    Type.Unsafe<'failing' | 'gone'>({
      type: 'string',
      enum: ['failing', 'gone'],
      description:
        'Only when disabled: `failing` (every delivery failed for WEBHOOK_DISABLE_AFTER, 5 days by default) or `gone` (it answered 410).',
    }),
  ),
  createdAt: DateTime('When it was registered: RFC 3339 in UTC.'),
  lastSuccessAt: Nullable(
    { type: 'string', format: 'date-time' },
    'When a delivery to it last succeeded (a 2xx), to within a second; null before the first.',
  ),
  failingSince: Nullable(
    { type: 'string', format: 'date-time' },
    'The first failed attempt since the last success: failing this long (WEBHOOK_DISABLE_AFTER) disables it. Null while not failing, and once enabled again.',
  ),
};

export const WebhookEndpoint = Type.Object(endpointProperties, {
  $id: 'WebhookEndpoint',
  additionalProperties: false,
  description: 'A webhook endpoint. Its secret is shown only when created and when rotated.',
  examples: [ENDPOINT_EXAMPLE],
});

export const WebhookEndpointWithSecret = Type.Object(
  {
    ...endpointProperties,
    secret: Type.String({
      description:
        '`whsec_` and the base64 of 32 random bytes: verifies the `webhook-signature` of every delivery. Shown only in this answer: keep it.',
    }),
  },
  {
    $id: 'WebhookEndpointWithSecret',
    additionalProperties: false,
    description: 'A webhook endpoint with its signing secret, as created or rotated.',
    examples: [{ ...ENDPOINT_EXAMPLE, secret: SECRET_EXAMPLE }],
  },
);

export const WebhookEndpointPatch = Type.Object(
  {
    url: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: MAX_URL_LENGTH,
        description: 'A new URL, checked as at creation (a private or loopback literal address is refused).',
      }),
    ),
    types: Type.Optional(
      Type.Union([Types, Type.Null()], {
        description: 'New types, for the events committed from now on; `null`: every type (`["*"]`).',
        [ANY_OF_MESSAGE]: 'must be a non-empty list of event types, or ["*"], or null',
      }),
    ),
    description: Type.Optional(
      Type.Union([Type.String({ maxLength: MAX_DESCRIPTION_LENGTH }), Type.Null()], {
        description: 'Up to 255 characters; `null`: `""`.',
        [ANY_OF_MESSAGE]: `must be a string of at most ${MAX_DESCRIPTION_LENGTH} characters, or null`,
      }),
    ),
    rateLimit: Type.Optional(RateLimitValue(RATE_LIMIT_DESCRIPTION)),
  },
  {
    $id: 'WebhookEndpointPatch',
    additionalProperties: false,
    description:
      'A JSON Merge Patch (RFC 7396) of an endpoint: a member present replaces that field, `null` restores its ' +
      'default (the url cannot be removed), a member absent leaves it as it is. Any other property is refused.',
    examples: [{ description: 'Fulfilment, EU', rateLimit: 20 }],
  },
);

export const WebhookEndpoints = Type.Array(ref(WebhookEndpoint), {
  $id: 'WebhookEndpoints',
  description: 'A page of webhook endpoints in ascending id order.',
  examples: [[ENDPOINT_EXAMPLE]],
});

export const WebhookDeliveryStatus = Type.Unsafe<(typeof WEBHOOK_DELIVERY_STATUSES)[number]>({
  $id: 'WebhookDeliveryStatus',
  type: 'string',
  enum: [...WEBHOOK_DELIVERY_STATUSES],
  description:
    '`pending` (an attempt is due or scheduled), `succeeded` (a 2xx), `failed` (no attempt left, or the endpoint was disabled).',
});

export const WebhookDelivery = Type.Object(
  {
    eventId: Int64({ description: 'The event delivered (the `webhook-id` header).', minimum: 1 }),
    status: ref(WebhookDeliveryStatus),
    attempts: Type.Integer({ minimum: 0, description: 'Attempts made so far.' }),
    lastAttemptAt: Nullable(
      { type: 'string', format: 'date-time' },
      'When the last attempt was made; null before the first.',
    ),
    nextAttemptAt: Nullable(
      { type: 'string', format: 'date-time' },
      'When the next attempt is due; null unless pending.',
    ),
    lastResponseStatus: Nullable(
      { type: 'integer' },
      "The receiver's status at the last attempt; null when it did not answer.",
    ),
    lastError: Nullable(
      { type: 'string' },
      'Why the last attempt failed: `HTTP <status>: ` and at most 1 KiB of the answer, or what went wrong with the connection; null after a success.',
    ),
  },
  {
    $id: 'WebhookDelivery',
    additionalProperties: false,
    description: 'One event for one endpoint, and how its attempts went. Every field is always present.',
    examples: [DELIVERY_EXAMPLE],
  },
);

export const WebhookDeliveries = Type.Array(ref(WebhookDelivery), {
  $id: 'WebhookDeliveries',
  description: 'A page of deliveries, newest event first.',
  examples: [[DELIVERY_EXAMPLE]],
});

const ATTEMPT_EXAMPLE = {
  number: 1,
  startedAt: '2026-11-23T09:30:00.198Z',
  durationMs: 12,
  responseStatus: 503,
  responseBody: 'try later',
  error: null,
  trigger: 'schedule',
};

export const WebhookAttempt = Type.Object(
  {
    number: Type.Integer({ minimum: 1, description: "The attempt's number: 1 for the delivery's first." }),
    startedAt: DateTime('When the attempt began (RFC 3339, UTC).'),
    durationMs: Type.Integer({
      minimum: 0,
      description: 'How long it took, in milliseconds, to the answer or the failure.',
    }),
    responseStatus: Nullable({ type: 'integer' }, "The receiver's status; null when it did not answer."),
    responseBody: Nullable(
      { type: 'string' },
      "The first 1 KiB of the receiver's answer, as text, exactly as it sent it (untrusted: show it escaped); null when it did not answer.",
    ),
    error: Nullable(
      { type: 'string' },
      'Why there was no answer (a timeout, a refused or reset connection, an address the network policy refuses); null when it answered.',
    ),
    trigger: Type.Unsafe<(typeof ATTEMPT_TRIGGERS)[number]>({
      type: 'string',
      enum: [...ATTEMPT_TRIGGERS],
      description:
        'What started it: `schedule` (the first attempt, and the retry schedule), `retry` (retryWebhookDelivery), `recover`.',
    }),
  },
  {
    $id: 'WebhookAttempt',
    additionalProperties: false,
    description:
      "One attempt of a delivery. The request's signature and the endpoint's secret are never kept. Attempts are kept as long as their event (`EVENT_RETENTION_DAYS`). Every field is always present.",
    examples: [ATTEMPT_EXAMPLE],
  },
);

export const WebhookAttempts = Type.Array(ref(WebhookAttempt), {
  $id: 'WebhookAttempts',
  description: 'A page of attempts, oldest first.',
  examples: [[ATTEMPT_EXAMPLE]],
});

export const ListWebhookAttemptsQuery = Type.Object(
  { limit: Type.Optional(Limit('attempts')), cursor: Type.Optional(Cursor()) },
  { additionalProperties: false },
);

export const ListWebhookEndpointsQuery = Type.Object(
  { limit: Type.Optional(Limit('endpoints')), cursor: Type.Optional(Cursor()) },
  { additionalProperties: false },
);

export const ListWebhookDeliveriesQuery = Type.Object(
  {
    limit: Type.Optional(Limit('deliveries')),
    status: Type.Optional(
      Type.Unsafe<(typeof WEBHOOK_DELIVERY_STATUSES)[number]>({
        ...ref(WebhookDeliveryStatus),
        description: 'Only deliveries with this status.',
      }),
    ),
    cursor: Type.Optional(Cursor()),
  },
  { additionalProperties: false },
);

export const EndpointIdParams = Type.Object({
  endpointId: Int64({ description: 'Identifier of the webhook endpoint (1 to 2^63-1).', minimum: 1 }),
});

export const DeliveryParams = Type.Object({
  endpointId: Int64({ description: 'Identifier of the webhook endpoint (1 to 2^63-1).', minimum: 1 }),
  eventId: Int64({ description: 'Identifier of the event delivered (1 to 2^63-1).', minimum: 1 }),
});

/** An RFC 3339 date-time with its offset (the exact instant is read by Date, which refuses 2026-13-01). */
const RFC3339 = (description: string) =>
  Type.String({
    format: 'date-time',
    pattern: '^\\d{4}-\\d{2}-\\d{2}[Tt]\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?([Zz]|[+-]\\d{2}:\\d{2})$',
    [PATTERN_MESSAGE]: 'must be an RFC 3339 date-time with an offset, such as 2026-11-23T09:00:00Z',
    description,
  });

export const RecoveryRequest = Type.Object(
  {
    since: RFC3339(
      'The first event time to recover: not in the future, nor older than the event retention (EVENT_RETENTION_DAYS, 30 days).',
    ),
    until: Type.Optional(RFC3339('The event time to stop before (after `since`); now when absent.')),
  },
  {
    $id: 'RecoveryRequest',
    additionalProperties: false,
    description: 'The window of event times to recover. Any other property is refused.',
    examples: [{ since: '2026-11-23T08:00:00Z' }],
  },
);

export const Recovery = Type.Object(
  {
    queued: Type.Integer({
      minimum: 0,
      description:
        "The endpoint's deliveries that ended `failed` for an event of the window: each is attempted once more.",
    }),
  },
  {
    $id: 'Recovery',
    additionalProperties: false,
    description: 'A recovery, started: it runs in the background.',
    examples: [{ queued: 42 }],
  },
);

export const WEBHOOK_SCHEMAS = [
  RecoveryRequest,
  Recovery,
  NewWebhookEndpoint,
  WebhookEndpointPatch,
  WebhookEndpoint,
  WebhookEndpointWithSecret,
  WebhookEndpoints,
  WebhookDeliveryStatus,
  WebhookDelivery,
  WebhookDeliveries,
  WebhookAttempt,
  WebhookAttempts,
];
