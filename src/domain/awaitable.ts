/**
 * A value a store gives at once or later: SQLite answers a read synchronously, PostgreSQL over the
 * network. Reads on the request path return one, so an answer that is ready takes no promise and no
 * turn of the event loop to reach the client.
 */
export type Awaitable<T> = T | Promise<T>;

/** `next(value)` (a plain value, not a promise), now when `value` is ready, else once it resolves. */
export function andThen<T, R>(value: Awaitable<T>, next: (value: T) => R): Awaitable<R> {
  return value instanceof Promise ? (value.then(next) as Promise<R>) : next(value);
}
