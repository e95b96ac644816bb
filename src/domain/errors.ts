/** A paging cursor that this service did not issue, or issued for a different filter. */
export class InvalidCursorError extends Error {
  override readonly name = 'InvalidCursorError';
}

/** An Idempotency-Key already used, within its window, for a request with a different body. */
export class IdempotencyKeyReusedError extends Error {
  override readonly name = 'IdempotencyKeyReusedError';
  constructor() {
    super('this Idempotency-Key was already used with a different request body; use a new key');
  }
}

/**
 * The database could not do the work now: it is down, did not answer within its bound, or refused
 * (disk full, read-only, busy). Transient by nature, so a client is told to retry, never that it erred.
 */
export class StorageUnavailableError extends Error {
  override readonly name = 'StorageUnavailableError';
}

/**
 * The request is valid but the resource's state forbids it (an animal that is not available, an order
 * already delivered): answered 409, with a message naming the state that stands in the way.
 */
export class ConflictError extends Error {
  override readonly name = 'ConflictError';
}

/** A field of a request names a resource that does not exist (an order's `petId`): the request is invalid. */
export class UnknownReferenceError extends Error {
  override readonly name = 'UnknownReferenceError';
}
