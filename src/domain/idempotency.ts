import { createHash } from 'node:crypto';
import { IdempotencyKeyReusedError } from './errors.js';
import type { NewPet, Pet } from './pet.js';
import { newPetRecord } from './pet-catalog.js';
import type { IdempotencyStore } from './storage.js';

/** How long a key is remembered: Stripe's and the IETF draft's usual 24 hours. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

/**
 * What makes two createPet requests "the same": the values sent, not their bytes, so key order and
 * white space do not matter. An omitted status differs from an explicit one: the client said
 * something else, even if the stored pet would be alike.
 */
export function requestHashOf(pet: NewPet): string {
  const meaning = JSON.stringify([pet.name, pet.categoryId.toString(), pet.status ?? null]);
  return createHash('sha256').update(meaning).digest('hex');
}

/**
 * createPet with an Idempotency-Key (draft-ietf-httpapi-idempotency-key-header): the first request
 * with a key creates the pet; a retry with the same key and body within the window gets that same
 * pet back and creates nothing; the same key with a different body is refused.
 */
export class IdempotentPetCreation {
  readonly #store: IdempotencyStore;
  readonly #now: () => Date;

  constructor(store: IdempotencyStore, now: () => Date) {
    this.#store = store;
    this.#now = now;
  }

  /** `apiKeyHash` scopes the key to its sender: two clients' keys never meet. */
  async create(apiKeyHash: string, key: string, pet: NewPet): Promise<{ pet: Pet; replayed: boolean }> {
    const at = this.#now();
    const requestHash = requestHashOf(pet);
    const outcome = await this.#store.createPetOnce(
      { apiKeyHash, key, requestHash, at, expiredBefore: new Date(at.getTime() - IDEMPOTENCY_WINDOW_MS) },
      newPetRecord(pet),
    );
    if (outcome.requestHash !== requestHash) throw new IdempotencyKeyReusedError();
    return { pet: outcome.pet, replayed: outcome.replayed };
  }

  /** Forgets keys past the window (they are already ignored); resolves to how many. */
  prune(): Promise<number> {
    return this.#store.prune(new Date(this.#now().getTime() - IDEMPOTENCY_WINDOW_MS));
  }
}
