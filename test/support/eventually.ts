/**
 * Waiting on a condition instead of a deadline. The safety limit is far beyond any expected wait: it
 * only turns "never happens" into a failure naming what never happened, and asserts no duration.
 */
export const NEVER_MS = 60_000;

/** Asks until `done(answer)` holds and returns that answer; fails with `what` if it never does. */
export async function until<T>(
  ask: () => Promise<T>,
  done: (answer: T) => boolean,
  what: string,
  pauseMs = 50,
): Promise<T> {
  const giveUp = Date.now() + NEVER_MS;
  for (;;) {
    const answer = await ask();
    if (done(answer)) return answer;
    if (Date.now() > giveUp) throw new Error(`never happened: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
}
