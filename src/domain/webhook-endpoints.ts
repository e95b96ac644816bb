import { ConflictError } from './errors.js';
import { idempotencyClaim, recoveryRequestHashOf } from './idempotency.js';
import type { NetworkPolicy } from './network-policy.js';
import { type CursorCodec, DEFAULT_PAGE_SIZE } from './paging.js';
import {
  checkEndpointUrl,
  type DeliveryQueue,
  type EndpointChanges,
  endpointTypes,
  InvalidEndpointError,
  newWebhookSecret,
  PREVIOUS_SECRET_TTL_MS,
  type WebhookAttempt,
  type WebhookDelivery,
  type WebhookDeliveryStatus,
  type WebhookEndpoint,
  type WebhookEndpointStore,
} from './webhooks.js';

/** What a create past WEBHOOK_MAX_ENDPOINTS answers (409), naming the limit. */
export const endpointLimitMessage = (max: number): string =>
  `at most ${max} webhook endpoints may exist (WEBHOOK_MAX_ENDPOINTS); delete one first`;

export interface NewEndpointRequest {
  url: string;
  types?: readonly string[] | undefined;
  description?: string | undefined;
  rateLimit?: number | null | undefined;
}

/** A JSON Merge Patch of an endpoint: absent leaves a field, null restores its default. */
export interface EndpointPatch {
  url?: string | undefined;
  types?: readonly string[] | null | undefined;
  description?: string | null | undefined;
  rateLimit?: number | null | undefined;
}

export interface RecoveryRequest {
  since: Date;
  until?: Date | undefined;
  /** SHA-256 of the API key that asked: Idempotency-Keys are the caller's own. */
  caller?: string | undefined;
  idempotencyKey?: string | undefined;
}

/** A recovery started: how many it queued, and whether this is the stored answer to an earlier request. */
export interface RecoveryStarted {
  queued: number;
  replayed: boolean;
}

const DAY_MS = 24 * 60 * 60 * 1000;

export interface Page<T> {
  items: T[];
  nextCursor?: string;
}

/** The webhook endpoints' use cases, one per operation, free of HTTP and SQL. */
export class WebhookEndpoints {
  readonly #store: WebhookEndpointStore;
  readonly #deliveries: DeliveryQueue;
  readonly #policy: NetworkPolicy;
  readonly #endpointCursors: CursorCodec;
  readonly #deliveryCursors: CursorCodec;
  readonly #attemptCursors: CursorCodec;
  readonly #now: () => Date;
  readonly #maxEndpoints: number;
  readonly #retentionDays: number;

  constructor(
    store: WebhookEndpointStore,
    deliveries: DeliveryQueue,
    policy: NetworkPolicy,
    cursors: { endpoints: CursorCodec; deliveries: CursorCodec; attempts: CursorCodec },
    now: () => Date,
    maxEndpoints: number,
    retentionDays: number,
  ) {
    this.#maxEndpoints = maxEndpoints;
    this.#retentionDays = retentionDays;
    this.#store = store;
    this.#deliveries = deliveries;
    this.#policy = policy;
    this.#endpointCursors = cursors.endpoints;
    this.#deliveryCursors = cursors.deliveries;
    this.#attemptCursors = cursors.attempts;
    this.#now = now;
  }

  /**
   * Throws InvalidEndpointError naming `url` or `types`, ConflictError when `maxEndpoints` exist. The
   * answer carries the secret: the only time but a rotation's.
   */
  async create({ url, types, description = '', rateLimit }: NewEndpointRequest): Promise<WebhookEndpoint> {
    const endpoint = await this.#store.createEndpoint(
      {
        url: checkEndpointUrl(url, this.#policy),
        types: endpointTypes(types),
        description,
        rateLimit: rateLimit ?? undefined,
        secret: newWebhookSecret(),
        createdAt: this.#now(),
      },
      this.#maxEndpoints,
    );
    if (!endpoint) throw new ConflictError(endpointLimitMessage(this.#maxEndpoints));
    return endpoint;
  }

  async list(limit = DEFAULT_PAGE_SIZE, cursor?: string): Promise<Page<WebhookEndpoint>> {
    const afterId = cursor ? this.#endpointCursors.decode(cursor, {}).afterId : 0n;
    const items = await this.#store.listEndpoints(afterId, limit + 1);
    if (items.length <= limit) return { items };
    items.length = limit;
    const last = items[items.length - 1] as WebhookEndpoint;
    return { items, nextCursor: this.#endpointCursors.encode({ afterId: last.id }) };
  }

  find(id: bigint): Promise<WebhookEndpoint | undefined> {
    return this.#store.findEndpoint(id);
  }

  /**
   * Changes what the patch names, the secret kept; undefined when there is no such endpoint. Throws
   * InvalidEndpointError naming `url` or `types` before anything changes.
   */
  update(id: bigint, patch: EndpointPatch): Promise<WebhookEndpoint | undefined> {
    const changes: EndpointChanges = {};
    if (patch.url !== undefined) changes.url = checkEndpointUrl(patch.url, this.#policy);
    if (patch.types !== undefined) changes.types = endpointTypes(patch.types ?? undefined);
    if (patch.description !== undefined) changes.description = patch.description ?? '';
    if (patch.rateLimit !== undefined) changes.rateLimit = patch.rateLimit;
    return this.#store.updateEndpoint(id, changes);
  }

  delete(id: bigint): Promise<boolean> {
    return this.#store.deleteEndpoint(id);
  }

  enable(id: bigint): Promise<WebhookEndpoint | undefined> {
    return this.#store.enableEndpoint(id);
  }

  /** A new secret; the old one keeps signing beside it for 24 hours. */
  rotateSecret(id: bigint): Promise<WebhookEndpoint | undefined> {
    return this.#store.rotateSecret(
      id,
      newWebhookSecret(),
      new Date(this.#now().getTime() + PREVIOUS_SECRET_TTL_MS),
    );
  }

  /** Newest event first; undefined when the endpoint does not exist. */
  async deliveries(
    endpointId: bigint,
    {
      limit = DEFAULT_PAGE_SIZE,
      status,
      cursor,
    }: { limit?: number; status?: WebhookDeliveryStatus | undefined; cursor?: string | undefined },
  ): Promise<Page<WebhookDelivery> | undefined> {
    if (!(await this.#store.findEndpoint(endpointId))) return undefined;
    // The position is the last event id seen, going down; the cursor is good for this endpoint and status only.
    const filter = { status, petId: endpointId };
    const beforeEventId = cursor ? this.#deliveryCursors.decode(cursor, filter).afterId : undefined;
    const items = await this.#deliveries.listDeliveries({
      endpointId,
      beforeEventId,
      status,
      limit: limit + 1,
    });
    if (items.length <= limit) return { items };
    items.length = limit;
    const last = items[items.length - 1] as WebhookDelivery;
    return { items, nextCursor: this.#deliveryCursors.encode({ afterId: last.eventId, ...filter }) };
  }

  /** Oldest first; undefined when the endpoint has no delivery of this event. */
  async attempts(
    endpointId: bigint,
    eventId: bigint,
    { limit = DEFAULT_PAGE_SIZE, cursor }: { limit?: number; cursor?: string | undefined },
  ): Promise<Page<WebhookAttempt> | undefined> {
    // The position is the last attempt's number; the cursor is good for this delivery only.
    const filter = { status: `${endpointId}/${eventId}` };
    const after = cursor ? Number(this.#attemptCursors.decode(cursor, filter).afterId) : 0;
    const items = await this.#deliveries.listAttempts(endpointId, eventId, after, limit + 1);
    if (!items || items.length <= limit) return items && { items };
    items.length = limit;
    const last = items[items.length - 1] as WebhookAttempt;
    return { items, nextCursor: this.#attemptCursors.encode({ afterId: BigInt(last.number), ...filter }) };
  }

  /**
   * Attempts once more, in event order, every delivery of the endpoint that ended `failed` for an event
   * that occurred from `since` (within the event retention, not in the future) until `until` (after
   * `since`; now when absent); resolves to how many, or undefined when there is no such endpoint. With
   * an Idempotency-Key, a repeat of the request gets the first one's answer (`replayed`).
   * Throws InvalidEndpointError naming `since` or `until`; ConflictError while one runs, or when the
   * endpoint is disabled.
   */
  async recover(
    endpointId: bigint,
    { since, until, caller, idempotencyKey }: RecoveryRequest,
  ): Promise<RecoveryStarted | undefined> {
    const now = this.#now();
    const oldest = now.getTime() - this.#retentionDays * DAY_MS;
    if (since.getTime() > now.getTime()) throw new InvalidEndpointError('since must not be in the future');
    if (since.getTime() < oldest)
      throw new InvalidEndpointError(
        `since must be within the event retention (EVENT_RETENTION_DAYS: ${this.#retentionDays} days)`,
      );
    if (until !== undefined && until.getTime() <= since.getTime())
      throw new InvalidEndpointError('until must be after since');
    const idempotency =
      idempotencyKey === undefined || caller === undefined
        ? undefined
        : idempotencyClaim(caller, idempotencyKey, recoveryRequestHashOf(endpointId, since, until), now);
    const started = await this.#deliveries.startRecovery(
      endpointId,
      { since, until: until ?? now },
      now,
      idempotency,
    );
    switch (started.outcome) {
      case 'started':
        return { queued: started.queued, replayed: started.replayed };
      case 'not_found':
        return undefined;
      case 'disabled':
        throw new ConflictError('this webhook endpoint is disabled: enable it first');
      case 'running':
        throw new ConflictError('a recovery of this webhook endpoint is under way: wait for it to end');
    }
  }

  /** The delivery is attempted again now; undefined when the endpoint has no delivery of this event. */
  retry(endpointId: bigint, eventId: bigint): Promise<WebhookDelivery | undefined> {
    return this.#deliveries.retryDelivery(endpointId, eventId, this.#now());
  }
}
