// No imports: the console (console/src/api.ts) shares this list with the service.

/**
 * docs/api.md: what a key may do. A read (GET) needs its group's `:read`, anything else its `:write`.
 * The order is the order keys list and the OpenAPI document show them in.
 */
export const API_KEY_SCOPES = [
  'pets:read',
  'pets:write',
  'orders:read',
  'orders:write',
  'events:read',
  'webhooks:read',
  'webhooks:write',
] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];

export const isApiKeyScope = (value: string): value is ApiKeyScope =>
  (API_KEY_SCOPES as readonly string[]).includes(value);
