import type { Pet, PetStatus } from '../domain/pet.js';

/** A row of the pets table as every adapter reads it: snake_case columns, int64 values as bigint. */
export interface PetRow {
  id: bigint;
  name: string;
  category_id: bigint;
  status: PetStatus;
}

export const toPet = (row: PetRow): Pet => ({
  id: row.id,
  name: row.name,
  categoryId: row.category_id,
  status: row.status,
});
