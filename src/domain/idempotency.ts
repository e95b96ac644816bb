import { createHash } from 'node:crypto';
import type { NewOrder } from './order.js';
import type { NewPet } from './pet.js';
import type { IdempotencyClaim, IdempotencyStore } from './storage.js';

/** How long a key is remembered: Stripe's and the IETF draft's usual 24 hours. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

/**
 * What makes two createPet requests "the same": the values sent, not their bytes, so key order and
 * white space do not matter. An omitted status differs from an explicit one: the client said
 * something else, even if the stored pet would be alike.
 */
export function requestHashOf(pet: NewPet): string {
  return digest([pet.name, pet.categoryId.toString(), pet.status ?? null]);
}

/** Two placeOrder requests are the same when they name the same animal. */
export function orderRequestHashOf(order: NewOrder): string {
  return digest(['placeOrder', order.petId.toString()]);
}

/** Two recover requests are the same when they name the same endpoint and window. */
export function recoveryRequestHashOf(endpointId: bigint, since: Date, until: Date | undefined): string {
  return digest(['recover', endpointId.toString(), since.toISOString(), until?.toISOString() ?? null]);
}

const digest = (meaning: readonly unknown[]): string =>
  createHash('sha256').update(JSON.stringify(meaning)).digest('hex');

/** One use of an Idempotency-Key at `at`: a record older than the window is treated as absent. */
export function idempotencyClaim(
  apiKeyHash: string,
  key: string,
  requestHash: string,
  at: Date,
): IdempotencyClaim {
  return { apiKeyHash, key, requestHash, at, expiredBefore: new Date(at.getTime() - IDEMPOTENCY_WINDOW_MS) };
}

/** Forgets keys past the window (they are already ignored); resolves to how many. */
export function pruneIdempotencyKeys(store: IdempotencyStore, now: Date): Promise<number> {
  return store.prune(new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS));
}
