import type { AttemptTrigger, WebhookAttempt } from '../domain/webhooks.js';

/** An attempt as both adapters read it: `started_at` in epoch milliseconds (SQLite) or as text (json_agg). */
export interface AttemptRow {
  number: number;
  started_at: number | string;
  duration_ms: number;
  response_status: number | null;
  response_body: string | null;
  error: string | null;
  trigger: AttemptTrigger;
}

export const ATTEMPT_COLUMNS =
  'number, started_at, duration_ms, response_status, response_body, error, trigger';

export const toAttempt = (row: AttemptRow): WebhookAttempt => ({
  number: row.number,
  startedAt: new Date(row.started_at),
  durationMs: row.duration_ms,
  responseStatus: row.response_status ?? undefined,
  responseBody: row.response_body ?? undefined,
  error: row.error ?? undefined,
  trigger: row.trigger,
});
