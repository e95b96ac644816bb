import type { CursorCodec } from './paging.js';
import { DEFAULT_PET_STATUS, type NewPet, type Pet, type PetStatus } from './pet.js';
import type { PetRecordInput, PetStore } from './storage.js';

/** The contract's page sizes: `limit` defaults to 20 and may not exceed 100. */
export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

export interface PetQuery {
  limit?: number | undefined;
  status?: PetStatus | undefined;
  cursor?: string | undefined;
}

export interface PetPage {
  pets: Pet[];
  /** The cursor of the following page; absent on the last page. */
  nextCursor?: string;
}

/** What is stored for a pet a client sent: its status defaults to available. */
export const newPetRecord = (pet: NewPet): PetRecordInput => ({
  name: pet.name,
  categoryId: pet.categoryId,
  status: pet.status ?? DEFAULT_PET_STATUS,
});

/** The use cases of the pets resource, free of HTTP and SQL. */
export class PetCatalog {
  readonly #store: PetStore;
  readonly #cursors: CursorCodec;

  constructor(store: PetStore, cursors: CursorCodec) {
    this.#store = store;
    this.#cursors = cursors;
  }

  /** Ascending id order: keyset paging visits each pet once, whatever is created meanwhile. */
  async list(query: PetQuery): Promise<PetPage> {
    const limit = query.limit ?? DEFAULT_PAGE_SIZE;
    const afterId = query.cursor ? this.#cursors.decode(query.cursor, query.status).afterId : 0n;
    // One row more than asked tells whether a next page exists without a COUNT.
    const pets = await this.#store.list({ afterId, status: query.status, limit: limit + 1 });
    if (pets.length <= limit) return { pets };
    pets.length = limit;
    const last = pets[pets.length - 1] as Pet;
    return { pets, nextCursor: this.#cursors.encode({ afterId: last.id, status: query.status }) };
  }

  create(pet: NewPet): Promise<Pet> {
    return this.#store.create(newPetRecord(pet));
  }

  find(id: bigint): Promise<Pet | undefined> {
    return this.#store.findById(id);
  }
}
