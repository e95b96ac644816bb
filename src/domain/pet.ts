/** The availability of an animal. The interface defines no transitions: it is set once, on creation. */
export const PET_STATUSES = ['available', 'pending', 'sold'] as const;
export type PetStatus = (typeof PET_STATUSES)[number];

/** docs/api.md: a pet created without a status is available. */
export const DEFAULT_PET_STATUS: PetStatus = 'available';

/** An animal as the service stores and returns it. int64 values are bigints so none is ever rounded. */
export interface Pet {
  id: bigint;
  name: string;
  categoryId: bigint;
  status: PetStatus;
}

/** What a client sends to add an animal. */
export interface NewPet {
  name: string;
  categoryId: bigint;
  status?: PetStatus | undefined;
}

/** The bounds of a signed 64-bit integer, the `int64` format of the contract. */
export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;
