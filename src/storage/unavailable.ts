import { StorageUnavailableError } from '../domain/errors.js';
import { interceptErrors } from './intercept-errors.js';

/** `error` as the domain sees it: StorageUnavailableError when `isUnavailable` recognises it. */
export function toStorageError(error: unknown, isUnavailable: (error: unknown) => boolean): unknown {
  if (error instanceof StorageUnavailableError || !isUnavailable(error)) return error;
  return new StorageUnavailableError(`the database is unavailable: ${(error as Error).message}`, {
    cause: error,
  });
}

/**
 * The same store, with every error that `isUnavailable` recognises rethrown as StorageUnavailableError
 * (the driver's error kept as its cause). Each adapter knows its driver's errors; everything above the
 * adapters knows only the domain's.
 */
export function translateUnavailable<T extends object>(
  target: T,
  isUnavailable: (error: unknown) => boolean,
): T {
  return interceptErrors(target, (error) => {
    throw toStorageError(error, isUnavailable);
  });
}
