/**
 * When a failed webhook delivery is tried again: after each delay of the schedule in turn (by default
 * 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: eight attempts over about 27 hours), each delay ±20% at
 * random so that receivers coming back from an outage are not hit by every retry at once.
 */
export const DEFAULT_RETRY_SCHEDULE = '5s,5m,30m,2h,5h,10h,10h';
export const JITTER = 0.2;

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `5s`, `5m`, `2h`, `1d`, `250ms`: milliseconds; throws naming the text that is not a duration. */
export function parseDurationMs(text: string): number {
  const match = /^(\d{1,9})(ms|s|m|h|d)$/.exec(text.trim());
  if (!match) throw new Error(`"${text}" is not a duration such as 250ms, 5s, 5m, 2h or 5d`);
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

/** The delays of a schedule such as `5s,5m,30m`, in milliseconds. */
export const parseRetrySchedule = (text: string): number[] => text.split(',').map(parseDurationMs);

/**
 * When to make the next attempt after `attemptsMade` attempts (the last of which failed at `at`), or
 * undefined when the schedule is spent and the delivery has failed. `random` in [0, 1).
 */
export function nextAttemptAt(
  schedule: readonly number[],
  attemptsMade: number,
  at: Date,
  random: () => number = Math.random,
): Date | undefined {
  const delay = schedule[attemptsMade - 1];
  if (delay === undefined) return undefined;
  const jittered = delay * (1 - JITTER + 2 * JITTER * random());
  return new Date(at.getTime() + Math.round(jittered));
}
