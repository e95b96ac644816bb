import { DEADLINE_MS, poll } from '../../support/service-process.js';

/**
 * Waiting on a condition instead of a deadline, with the one polling loop the process harness uses. Its
 * limit is far beyond any expected wait: it only turns "never happens" into a failure naming what never
 * happened, and asserts no duration.
 */
export const NEVER_MS = DEADLINE_MS;

/** Asks until `done(answer)` holds and returns that answer; fails naming `what` if it never does. */
export const until = <T>(ask: () => Promise<T>, done: (answer: T) => boolean, what: string): Promise<T> =>
  poll(what, async () => {
    const answer = await ask();
    return done(answer) ? answer : undefined;
  });
