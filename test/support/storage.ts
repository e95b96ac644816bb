import type { Pet } from '../../src/domain/pet.js';
import type { PetRecordInput, Storage } from '../../src/domain/storage.js';

/** Creates one pet through the storage port, without an Idempotency-Key. */
export const createPet = async (storage: Storage, pet: PetRecordInput): Promise<Pet> =>
  (await storage.pets.create({ pet })).pet;
