import { type Awaitable, andThen } from './awaitable.js';
import { IdempotencyKeyReusedError } from './errors.js';
import { eventCause } from './event-cause.js';
import { idempotencyClaim, requestHashOf } from './idempotency.js';
import { type CursorCodec, DEFAULT_PAGE_SIZE, idSet } from './paging.js';
import { DEFAULT_PET_STATUS, type NewPet, type Pet, type PetStatus } from './pet.js';
import type { PetRecordInput, PetStore } from './storage.js';

export interface PetQuery {
  limit?: number | undefined;
  status?: PetStatus | undefined;
  /** Only these pets (getPet's replacement); those that do not exist are simply absent. */
  ids?: readonly bigint[] | undefined;
  cursor?: string | undefined;
}

/** A page as the JSON array the API sends, written by the store (PetPageJson). */
export interface PetPageAsJson {
  json: string;
  /** The cursor of the following page; absent on the last page. */
  nextCursor?: string;
}

/** What is stored for a pet a client sent: its status defaults to available. */
export const newPetRecord = (pet: NewPet): PetRecordInput => ({
  name: pet.name,
  categoryId: pet.categoryId,
  status: pet.status ?? DEFAULT_PET_STATUS,
});

export interface PetCreationRequest {
  /** SHA-256 of the caller's API key: an Idempotency-Key is scoped to its sender. */
  caller: string;
  pet: NewPet;
  /** The Idempotency-Key sent with the request, if any. */
  idempotencyKey?: string | undefined;
}

/** The use cases of the pets resource, one per operation, free of HTTP and SQL. */
export class PetCatalog {
  readonly #store: PetStore;
  readonly #cursors: CursorCodec;
  readonly #now: () => Date;

  constructor(store: PetStore, cursors: CursorCodec, now: () => Date) {
    this.#store = store;
    this.#cursors = cursors;
    this.#now = now;
  }

  /**
   * listPets: a page in ascending id order (keyset paging visits each pet once, whatever is created
   * meanwhile), as the JSON the API sends, written by the store: the rows never become JavaScript
   * objects to be serialised again.
   */
  listJson(query: PetQuery): Awaitable<PetPageAsJson> {
    const limit = query.limit ?? DEFAULT_PAGE_SIZE;
    const filter = { status: query.status, ids: query.ids && idSet(query.ids) };
    const afterId = query.cursor ? this.#cursors.decode(query.cursor, filter).afterId : 0n;
    return andThen(this.#store.listJson({ afterId, ...filter, limit }), ({ json, lastIdIfMore }) =>
      lastIdIfMore === undefined
        ? { json }
        : { json, nextCursor: this.#cursors.encode({ afterId: lastIdIfMore, ...filter }) },
    );
  }

  /**
   * createPet. With an Idempotency-Key (draft-ietf-httpapi-idempotency-key-header), the first request
   * creates the pet; a retry with the same key and body within the window gets that same pet back and
   * creates nothing; the same key with a different body is refused. With or without a key, the create
   * takes the same path: the store groups concurrent creates into one durable commit.
   */
  async create({
    caller,
    pet,
    idempotencyKey,
  }: PetCreationRequest): Promise<{ pet: Pet; replayed: boolean }> {
    const at = this.#now();
    const cause = eventCause();
    if (idempotencyKey === undefined) return this.#store.create({ pet: newPetRecord(pet), at, cause });
    const requestHash = requestHashOf(pet);
    const created = await this.#store.create({
      pet: newPetRecord(pet),
      at,
      cause,
      idempotency: idempotencyClaim(caller, idempotencyKey, requestHash, at),
    });
    if (created.requestHash !== requestHash) throw new IdempotencyKeyReusedError();
    return { pet: created.pet, replayed: created.replayed };
  }

  /** getPet: the pet as the JSON object the API sends, written by the store; undefined when there is none. */
  findJson(id: bigint): Awaitable<string | undefined> {
    return this.#store.findJsonById(id);
  }
}
