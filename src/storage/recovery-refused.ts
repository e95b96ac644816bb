import type { RecoveryStart } from '../domain/webhooks.js';

/**
 * A recovery refused inside its transaction (no endpoint, disabled, one running): thrown to roll the
 * transaction back, an Idempotency-Key's claim with it, and caught to answer with its outcome.
 */
export class RecoveryRefused extends Error {
  readonly outcome: Exclude<RecoveryStart, { outcome: 'started' }>;

  constructor(outcome: Exclude<RecoveryStart, { outcome: 'started' }>) {
    super(outcome.outcome);
    this.outcome = outcome;
  }
}
