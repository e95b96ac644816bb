import type {
  DisabledReason,
  EndpointTypes,
  WebhookEndpoint,
  WebhookEndpointStatus,
} from '../../domain/webhooks.js';

/** An endpoint's row as PostgreSQL returns it: read by the endpoint store, and by the queue when it disables one. */
export interface EndpointRow {
  id: bigint;
  url: string;
  types: string[];
  description: string;
  rate_limit: number | null;
  status: WebhookEndpointStatus;
  disabled_reason: DisabledReason | null;
  created_at: Date;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: Date | null;
  last_success_at: Date | null;
  failing_since: Date | null;
}

export const ENDPOINT_COLUMNS =
  'id, url, types, description, rate_limit, status, disabled_reason, created_at, secret, previous_secret, previous_secret_until, last_success_at, failing_since';

export const toEndpoint = (row: EndpointRow): WebhookEndpoint => ({
  id: row.id,
  url: row.url,
  types: row.types as unknown as EndpointTypes,
  description: row.description,
  rateLimit: row.rate_limit ?? undefined,
  status: row.status,
  disabledReason: row.disabled_reason ?? undefined,
  createdAt: row.created_at,
  secret: row.secret,
  previousSecret: row.previous_secret ?? undefined,
  previousSecretUntil: row.previous_secret_until ?? undefined,
  lastSuccessAt: row.last_success_at ?? undefined,
  failingSince: row.failing_since ?? undefined,
});
