import type {
  DisabledReason,
  EndpointTypes,
  WebhookEndpoint,
  WebhookEndpointStatus,
} from '../../domain/webhooks.js';

/** An endpoint's row as SQLite returns it: read by the endpoint store, and by the queue's claims and disables. */
export interface EndpointRow {
  id: bigint;
  url: string;
  types: string;
  description: string;
  rate_limit: bigint | null;
  status: WebhookEndpointStatus;
  disabled_reason: DisabledReason | null;
  created_at: bigint;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: bigint | null;
  last_success_at: bigint | null;
  failing_since: bigint | null;
}

export const ENDPOINT_COLUMNS =
  'id, url, types, description, rate_limit, status, disabled_reason, created_at, secret, previous_secret, previous_secret_until, last_success_at, failing_since';

/** An instant stored in epoch milliseconds, or none. */
export const date = (ms: bigint | null): Date | undefined => (ms === null ? undefined : new Date(Number(ms)));

/** Types as one column: `*`, or the types separated by spaces (matched with instr in the fan-out). */
export const typesText = (types: EndpointTypes): string => types.join(' ');
export const typesOf = (text: string): EndpointTypes => text.split(' ') as unknown as EndpointTypes;

export const toEndpoint = (row: EndpointRow): WebhookEndpoint => ({
  id: row.id,
  url: row.url,
  types: typesOf(row.types),
  description: row.description,
  rateLimit: row.rate_limit === null ? undefined : Number(row.rate_limit),
  status: row.status,
  disabledReason: row.disabled_reason ?? undefined,
  createdAt: new Date(Number(row.created_at)),
  secret: row.secret,
  previousSecret: row.previous_secret ?? undefined,
  previousSecretUntil: date(row.previous_secret_until),
  lastSuccessAt: date(row.last_success_at),
  failingSince: date(row.failing_since),
});
