import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { EVENT_TYPES, type EventType, isEventType, type NewEvent } from './events.js';
import type { NetworkPolicy } from './network-policy.js';
import type { IdempotencyClaim } from './storage.js';
import { type BucketState, nextTokenAtMs, type TokenBucketPolicy, takeTokens } from './token-bucket.js';

/** An endpoint's `types`: event types, or `*` for every type, now and later. */
export type EndpointTypes = readonly ['*'] | readonly EventType[];

export const WEBHOOK_ENDPOINT_STATUSES = ['enabled', 'disabled'] as const;
export type WebhookEndpointStatus = (typeof WEBHOOK_ENDPOINT_STATUSES)[number];
/** Why an endpoint was disabled: its deliveries failed for too long, or it answered 410 Gone. */
export type DisabledReason = 'failing' | 'gone';

export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const;
export type WebhookDeliveryStatus = (typeof WEBHOOK_DELIVERY_STATUSES)[number];
/** What started an attempt: the retry schedule (the first attempt too), a person's retry, a recovery. */
export const ATTEMPT_TRIGGERS = ['schedule', 'retry', 'recover'] as const;
export type AttemptTrigger = (typeof ATTEMPT_TRIGGERS)[number];

/** How long a rotated-out secret keeps signing beside the new one. */
export const PREVIOUS_SECRET_TTL_MS = 24 * 60 * 60 * 1000;
export const MAX_URL_LENGTH = 2048;
export const MAX_DESCRIPTION_LENGTH = 255;
/** An endpoint's `rateLimit`: deliveries a second, 1 to this. */
export const MAX_RATE_LIMIT = 10_000;

/** An endpoint as stored, its secrets included: only create and rotate answers show a secret. */
export interface WebhookEndpoint {
  id: bigint;
  url: string;
  types: EndpointTypes;
  description: string;
  /** Deliveries a second at most, every delivery process together; undefined: no limit. */
  rateLimit: number | undefined;
  status: WebhookEndpointStatus;
  disabledReason: DisabledReason | undefined;
  createdAt: Date;
  secret: string;
  /** The secret before the last rotation, signing beside the new one until `previousSecretUntil`. */
  previousSecret: string | undefined;
  previousSecretUntil: Date | undefined;
  /** When a delivery to it last succeeded, to within a second; undefined before the first. */
  lastSuccessAt: Date | undefined;
  /** The first failure since the last success; undefined while not failing. */
  failingSince: Date | undefined;
}

export interface NewWebhookEndpoint {
  url: string;
  types: EndpointTypes;
  description: string;
  rateLimit?: number | undefined;
  secret: string;
  createdAt: Date;
}

/** What an update changes; a field left out stays as it is. `rateLimit: null` removes the limit. */
export interface EndpointChanges {
  url?: string;
  types?: EndpointTypes;
  description?: string;
  rateLimit?: number | null;
}

export interface WebhookDelivery {
  endpointId: bigint;
  eventId: bigint;
  status: WebhookDeliveryStatus;
  attempts: number;
  lastAttemptAt: Date | undefined;
  nextAttemptAt: Date | undefined;
  lastResponseStatus: number | undefined;
  lastError: string | undefined;
}

/**
 * One attempt of a delivery, as it is listed: the request's signature and the secret are never kept.
 * Kept as long as its event (EVENT_RETENTION_DAYS).
 */
export interface WebhookAttempt {
  /** 1 for the first attempt of the delivery. */
  number: number;
  startedAt: Date;
  durationMs: number;
  /** The receiver's status, when it answered. */
  responseStatus: number | undefined;
  /** The first 1 KiB of the answer's body, as text, when it answered. */
  responseBody: string | undefined;
  /** Why there was no answer (a timeout, a refused connection, an address refused by the policy). */
  error: string | undefined;
  trigger: AttemptTrigger;
}

/** A delivery leased to this node for one attempt, with what the attempt needs. */
export interface ClaimedDelivery {
  endpointId: bigint;
  eventId: bigint;
  /** Attempts made before this one. */
  attempts: number;
  /** What asked for this attempt. */
  trigger: AttemptTrigger;
  url: string;
  /** The secrets to sign with: the current one, and the previous one while it still signs. */
  secrets: string[];
  /** The body: the event as getEvent returns it. */
  body: string;
  /** The event's type, and what caused it (event-cause.ts): for the delivery's trace span. */
  eventType: EventType;
  cause: string | undefined;
  /** When the event occurred: the lag from it to a 2xx is measured (petstore_webhook_delivery_lag_seconds). */
  occurredAt: Date;
  /** The lease: until then no other node attempts it; the result is recorded only under it. */
  leaseUntil: Date;
}

/** How one attempt ended. */
export interface AttemptOutcome {
  at: Date;
  /** The attempt as it is listed (its number and trigger come from the delivery). */
  startedAt: Date;
  durationMs: number;
  responseBody: string | undefined;
  /** Why there was no answer; undefined when the receiver answered. */
  noAnswer: string | undefined;
  succeeded: boolean;
  /** The receiver's status, when it answered. */
  responseStatus: number | undefined;
  /** What went wrong (at most 1 KiB of the answer's body, or the connection's error). */
  error: string | undefined;
  /** When to try again; undefined after the last attempt (the delivery fails) or on success. */
  nextAttemptAt: Date | undefined;
  /** A 410 Gone: the endpoint is disabled at once. */
  gone: boolean;
}

/** What a claim leased, and when a rate-limited endpoint it left with due deliveries may be leased again. */
export interface Claim {
  deliveries: ClaimedDelivery[];
  /** The earliest next token of a throttled endpoint whose bucket the claim left empty. */
  throttledUntil: Date | undefined;
  /** When the next delivery left pending is due (a leased one: when its lease ends); undefined if none. */
  nextDueAt: Date | undefined;
}

/**
 * An endpoint's `rateLimit` as a token bucket, held in the database and taken at claim time, so it holds
 * across every delivery process: `rateLimit` a second, and one second's worth at once after a quiet spell.
 */
const throttlePolicy = (rateLimit: number): TokenBucketPolicy => ({ perSecond: rateLimit, burst: rateLimit });

/** How many of a rate-limited endpoint's deliveries a claim at `nowMs` may lease, `wanted` at most. */
export const throttleAllows = (
  rateLimit: number,
  bucket: BucketState | undefined,
  nowMs: number,
  wanted: number,
): number => takeTokens(bucket, nowMs, throttlePolicy(rateLimit), wanted).taken;

/** The bucket after a claim leased `leased`, and when the next may be leased if that emptied it. */
export function throttleAfter(
  rateLimit: number,
  bucket: BucketState | undefined,
  nowMs: number,
  leased: number,
): { bucket: BucketState; nextAt: Date | undefined } {
  const policy = throttlePolicy(rateLimit);
  const { state } = takeTokens(bucket, nowMs, policy, leased);
  return { bucket: state, nextAt: state.tokens < 1 ? new Date(nextTokenAtMs(state, policy)) : undefined };
}

/** A recovery's window of event times: every event with since <= occurredAt < until. */
export interface RecoveryWindow {
  since: Date;
  until: Date;
}

/** How asking for a recovery ended. */
export type RecoveryStart =
  /** `replayed`: an earlier request with the same Idempotency-Key started it; this one changed nothing. */
  | { outcome: 'started'; queued: number; replayed: boolean }
  | { outcome: 'not_found' }
  | { outcome: 'disabled' }
  | { outcome: 'running' };

/** How many failed deliveries a recovery moves back to pending at once. */
export const RECOVER_BATCH = 100;

/** What recording an attempt did to the endpoint. */
export type AttemptRecorded =
  | { recorded: false } // the lease had passed to another node: its attempt counts, not this one
  | { recorded: true; disabled: DisabledReason | undefined; failed: boolean };

export interface DeliveryListQuery {
  endpointId: bigint;
  /** Keyset position: only deliveries of events with a smaller id (newest first). */
  beforeEventId: bigint | undefined;
  status?: WebhookDeliveryStatus | undefined;
  limit: number;
}

export interface PendingDeliveries {
  count: number;
  /** When the oldest pending delivery's event occurred. */
  oldestAt: Date | undefined;
}

/**
 * How long the outcome of an attempt waits for others to share its transaction. A process attempts at
 * most WEBHOOK_CONCURRENCY_PER_ENDPOINT at once to an endpoint, so outcomes arrive a few at a time, and
 * a transaction for each few was a third of a delivery's cost (SQLite). The attempt's slot is free
 * meanwhile; its lease is kept until the outcome is written. Also the least time between two such
 * transactions' starts (CreateBatcher): written as each ended, batches were a few outcomes each.
 */
export const RECORD_LINGER_MS = 10;

/** What one claim may lease. */
export interface ClaimLimits {
  /** Deliveries leased by this claim at most, across endpoints. */
  limit: number;
  /** Attempts to one endpoint at once, every process together (WEBHOOK_CONCURRENCY_PER_ENDPOINT). */
  perEndpoint: number;
  /** The claiming process: a lease records it. */
  owner: string;
  /**
   * How many of an endpoint's deliveries the owner may hold at once while it alone holds any, for the
   * endpoints it leases deeper than `perEndpoint`.
   */
  depths: ReadonlyMap<bigint, number>;
}

/**
 * How many more of an endpoint's deliveries a claim may lease, given the live leases on it (`leased`),
 * `others` of them another process's. A process attempts at most `perEndpoint` at once and queues the
 * rest of what it holds. While another process holds some, every process's leases together stay within
 * `perEndpoint`, so their attempts do too; only an endpoint no one else holds is leased deeper, and then
 * the others lease none of it until the holder's queue is down to less than `perEndpoint`. Deeper
 * leases let a process go on attempting while it claims the next batch, instead of a claim per attempt.
 */
export function claimable(
  endpointId: bigint,
  leased: number,
  others: number,
  { perEndpoint, depths }: ClaimLimits,
): number {
  const bound = others > 0 ? perEndpoint : Math.max(perEndpoint, depths.get(endpointId) ?? perEndpoint);
  return Math.max(0, bound - leased);
}

/** Webhook endpoints, as the database holds them. */
export interface WebhookEndpointStore {
  /**
   * Stores the endpoint unless `maxEndpoints` exist already (then undefined), atomically on every node:
   * racing creates never make more. It gets the events committed after it.
   */
  createEndpoint(endpoint: NewWebhookEndpoint, maxEndpoints: number): Promise<WebhookEndpoint | undefined>;
  listEndpoints(afterId: bigint, limit: number): Promise<WebhookEndpoint[]>;
  findEndpoint(id: bigint): Promise<WebhookEndpoint | undefined>;
  /** Changes what `changes` names, the secret kept; undefined when there is no such endpoint. */
  updateEndpoint(id: bigint, changes: EndpointChanges): Promise<WebhookEndpoint | undefined>;
  /** Deletes the endpoint and its deliveries, pending ones included; false when there was none. */
  deleteEndpoint(id: bigint): Promise<boolean>;
  /** Enabled again: gets the events that occur from now on. Undefined when there is none. */
  enableEndpoint(id: bigint): Promise<WebhookEndpoint | undefined>;
  /** The new secret signs from now on, the current one beside it until `previousUntil`. */
  rotateSecret(id: bigint, secret: string, previousUntil: Date): Promise<WebhookEndpoint | undefined>;
  count(): Promise<number>;
  /** Endpoints copied from another database, ids and secrets kept; an id already present is left as it is. */
  importEndpoints(endpoints: readonly WebhookEndpoint[]): Promise<number>;
}

/**
 * Webhook deliveries, as the database holds them: the queue the deliverer claims from and records to,
 * and what the API reads and asks of it (deliveries, attempts, retries, recoveries).
 */
export interface DeliveryQueue {
  listDeliveries(query: DeliveryListQuery): Promise<WebhookDelivery[]>;
  /**
   * The delivery's attempts numbered above `afterNumber`, oldest first, at most `limit`; undefined when
   * the endpoint has no delivery of this event.
   */
  listAttempts(
    endpointId: bigint,
    eventId: bigint,
    afterNumber: number,
    limit: number,
  ): Promise<WebhookAttempt[] | undefined>;
  /**
   * Starts a recovery of the endpoint's deliveries that ended `failed`, for the events in `window`:
   * counts them, and records the recovery, which recoverNext then carries out. One at a time per
   * endpoint, on every node; none for a disabled endpoint. Nothing is recorded when none failed. With
   * an Idempotency-Key, the first request's answer is recorded with it, in the same transaction, and a
   * later request with the key gets that answer (`replayed`), or IdempotencyKeyReusedError if it asked
   * for another window or endpoint.
   */
  startRecovery(
    endpointId: bigint,
    window: RecoveryWindow,
    at: Date,
    idempotency?: IdempotencyClaim | undefined,
  ): Promise<RecoveryStart>;
  /**
   * For each recovery under way (of an enabled endpoint), moves its next `batch` failed deliveries, in
   * event order, back to pending, due at `now`, their next attempt a `recover`; a recovery ends with
   * its last batch, or when its endpoint is disabled. Resolves to how many deliveries it moved.
   */
  recoverNext(now: Date, batch: number): Promise<number>;
  /** The delivery becomes pending, due at `at`, its next attempt a `retry`; undefined when there is none. */
  retryDelivery(endpointId: bigint, eventId: bigint, at: Date): Promise<WebhookDelivery | undefined>;
  /**
   * Leases due deliveries of enabled endpoints until `leaseUntil`, within `limits` (see claimable) and
   * each endpoint's rate limit (throttleAllows). No two callers on any nodes get one delivery.
   */
  claimDue(now: Date, leaseUntil: Date, limits: ClaimLimits): Promise<Claim>;
  /**
   * Records an attempt made under its lease. A failure disables the endpoint when it answered 410, or
   * when it has failed since `failingSince` or earlier with no success between.
   */
  recordAttempt(
    delivery: ClaimedDelivery,
    outcome: AttemptOutcome,
    disableIfFailingSince: Date,
  ): Promise<AttemptRecorded>;
  /**
   * Gives the events committed since the last fan-out (at most `batch` of them, oldest first) their
   * deliveries, one per enabled endpoint whose types include the event and that existed (or was enabled
   * again) before it. Done here, after the change's own transaction, so a change costs the same however
   * many endpoints there are; one transaction per batch, so a crash leaves the batch to the next call and
   * loses nothing. Resolves to how many events it went through.
   */
  fanOut(batch: number): Promise<number>;
  /** Gives leases back (a stopping node): those deliveries are due again at once. */
  releaseLeases(deliveries: readonly ClaimedDelivery[]): Promise<void>;
  pending(): Promise<PendingDeliveries>;
  /**
   * `listener` is called when deliveries may have become due sooner than a claim's nextDueAt said: new events,
   * a retry, an endpoint enabled, on any node (on SQLite, another process's commits within 100 ms).
   * Returns the unsubscribe.
   */
  watch(listener: () => void): () => void;
}

/** `whsec_` and the base64 of 32 random bytes: the Standard Webhooks form of a signing secret. */
export const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

/** The types an endpoint was created with: absent means every type. Throws naming `types` otherwise. */
export function endpointTypes(types: readonly string[] | undefined): EndpointTypes {
  if (types === undefined) return ['*'];
  if (types.length === 1 && types[0] === '*') return ['*'];
  if (types.length === 0 || !types.every(isEventType))
    throw new InvalidEndpointError(
      `types must be a non-empty list of event types (${EVENT_TYPES.join(', ')}), or ["*"]`,
    );
  return [...new Set(types)];
}

/** A request to create or change an endpoint is invalid; the message names the field. */
export class InvalidEndpointError extends Error {
  override readonly name = 'InvalidEndpointError';
}

/** The host of a URL as an address, when it is one (`[::1]` → `::1`). */
const literalAddress = (hostname: string): string | undefined => {
  const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  return isIP(bare) ? bare : undefined;
};

/**
 * An endpoint's URL: absolute `http:` or `https:`, no user info, no fragment, at most 2,048
 * characters, and not a literal address webhooks may not reach. Host names are judged when connecting,
 * on the address they resolve to. Throws InvalidEndpointError naming `url`.
 */
export function checkEndpointUrl(text: string, policy: NetworkPolicy): string {
  const refuse = (why: string) => new InvalidEndpointError(`url ${why}`);
  if (text.length > MAX_URL_LENGTH) throw refuse(`must be at most ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw refuse('must be an absolute http: or https: URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw refuse('must be an absolute http: or https: URL');
  if (url.username !== '' || url.password !== '') throw refuse('must not contain user information');
  if (text.includes('#')) throw refuse('must not contain a fragment');
  const address = literalAddress(url.hostname);
  if (address !== undefined && !policy.permits(address))
    throw refuse('must not point to a private, loopback, link-local or otherwise non-public address');
  return text;
}

/**
 * An endpoint as the API shows it, its secrets left out: getWebhookEndpoint's body, and the data of
 * its webhook_endpoint.disabled event.
 */
export const publicEndpoint = (e: WebhookEndpoint) => ({
  id: e.id,
  url: e.url,
  types: [...e.types],
  description: e.description,
  rateLimit: e.rateLimit ?? null,
  status: e.status,
  ...(e.disabledReason ? { disabledReason: e.disabledReason } : {}),
  createdAt: e.createdAt.toISOString(),
  lastSuccessAt: e.lastSuccessAt?.toISOString() ?? null,
  failingSince: e.failingSince?.toISOString() ?? null,
});

/** publicEndpoint as JSON text, its int64 id exact. */
export function endpointJson(endpoint: WebhookEndpoint): string {
  const { id, ...rest } = publicEndpoint(endpoint);
  return `{"id":${id},${JSON.stringify(rest).slice(1)}`;
}

/**
 * Recorded in the transaction that disables the endpoint, by the one process whose update found it
 * still enabled: once, however many delivery processes run.
 */
export const endpointDisabled = (endpoint: WebhookEndpoint, at: Date): NewEvent => ({
  type: 'webhook_endpoint.disabled',
  occurredAt: at,
  data: endpointJson(endpoint),
});

/** Whether an endpoint with these types gets events of this type. */
export const subscribesTo = (types: EndpointTypes, type: EventType): boolean =>
  types[0] === '*' || (types as readonly string[]).includes(type);

/** Where a delivery stands after an attempt: succeeded, tried again later, or failed for good. */
export function statusAfter(outcome: AttemptOutcome): WebhookDeliveryStatus {
  if (outcome.succeeded) return 'succeeded';
  return outcome.nextAttemptAt && !outcome.gone ? 'pending' : 'failed';
}

/**
 * Why a failed attempt disables its endpoint, if it does: a 410 at once; otherwise failures ever since
 * `failingSince` (the first failure after the last success), which is `disableIfFailingSince` or earlier.
 */
export function disabledBy(
  outcome: AttemptOutcome,
  failingSince: Date | undefined,
  disableIfFailingSince: Date,
): DisabledReason | undefined {
  if (outcome.gone) return 'gone';
  if (failingSince !== undefined && failingSince.getTime() <= disableIfFailingSince.getTime())
    return 'failing';
  return undefined;
}

/** The secrets that sign a delivery made at `now`: the current one, and the previous while it lasts. */
export function signingSecrets(
  secret: string,
  previous: string | undefined,
  previousUntil: Date | undefined,
  now: Date,
): string[] {
  return previous !== undefined && previousUntil !== undefined && previousUntil.getTime() > now.getTime()
    ? [secret, previous]
    : [secret];
}
