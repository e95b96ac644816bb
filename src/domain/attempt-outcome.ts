import { nextAttemptAt } from './retry-schedule.js';
import type { AttemptOutcome, ClaimedDelivery } from './webhooks.js';

/** What the receiver did with one attempt: answered (a status, the first 1 KiB of the body), or not. */
export type AttemptAnswer =
  | { answered: true; status: number; body: string }
  | { answered: false; error: string };

/** The attempt as it ran: when it began and ended, on the service's clock, and how long it took. */
export interface AttemptTiming {
  startedAt: Date;
  at: Date;
  seconds: number;
}

/**
 * How an attempt ended, from the receiver's answer: a 2xx succeeds, a 410 disables the endpoint, anything
 * else is tried again on the schedule (`schedule`, `random` for its jitter) until it runs out. An attempt
 * a recovery asked for is made once: no schedule after it.
 */
export function attemptOutcome(
  delivery: ClaimedDelivery,
  answer: AttemptAnswer,
  { startedAt, at, seconds }: AttemptTiming,
  schedule: readonly number[],
  random: () => number,
): AttemptOutcome {
  const succeeded = answer.answered && answer.status >= 200 && answer.status < 300;
  const gone = answer.answered && answer.status === 410;
  return {
    at,
    startedAt,
    durationMs: Math.round(seconds * 1000),
    responseBody: answer.answered ? answer.body : undefined,
    noAnswer: answer.answered ? undefined : answer.error,
    succeeded,
    gone,
    responseStatus: answer.answered ? answer.status : undefined,
    error: succeeded
      ? undefined
      : answer.answered
        ? `HTTP ${answer.status}${answer.body ? `: ${answer.body}` : ''}`.slice(0, 1024 + 16)
        : answer.error,
    nextAttemptAt:
      succeeded || gone || delivery.trigger === 'recover'
        ? undefined
        : nextAttemptAt(schedule, delivery.attempts + 1, at, random),
  };
}
