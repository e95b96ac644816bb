/** `'a', 'b', 'c'`: a list of known constants (never user input) for an SQL `IN (…)` or `CHECK`. */
export const sqlList = (values: readonly string[]): string => values.map((value) => `'${value}'`).join(', ');

/**
 * The event types each migration that checks them wrote into the events table's CHECK: a released
 * migration never changes, so its list is frozen here rather than read from EVENT_TYPES, which grows.
 * The last list is EVENT_TYPES (a test holds it so); a new type is a new list and a migration.
 */
export const MIGRATED_EVENT_TYPES = {
  first: ['pet.created', 'order.placed', 'order.delivered', 'order.cancelled'],
  endpointDisabled: [
    'pet.created',
    'order.placed',
    'order.delivered',
    'order.cancelled',
    'webhook_endpoint.disabled',
  ],
} as const;
