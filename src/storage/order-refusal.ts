import type { PetStatus } from '../domain/pet.js';
import type { PlacedOrder } from '../domain/storage.js';

/**
 * A placement refused, thrown inside its write (SQLite: the write's savepoint; PostgreSQL: its
 * transaction) so that everything it did, a claimed Idempotency-Key included, is rolled back; caught
 * outside, its `outcome` is how the placement ended. Both order stores throw it the same way.
 */
export class Refusal {
  constructor(readonly outcome: PlacedOrder) {}

  /** The animal could not be taken: unknown when it has no status, else not available in the one it has. */
  static petNotTaken(petStatus: PetStatus | undefined): Refusal {
    return new Refusal(
      petStatus === undefined ? { outcome: 'unknown_pet' } : { outcome: 'pet_not_available', petStatus },
    );
  }
}
