import { createHmac } from 'node:crypto';

/**
 * The Standard Webhooks signature of a delivery (https://www.standardwebhooks.com): for each secret,
 * `v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`, keyed with the
 * secret's decoded bytes (what follows `whsec_`); several separated by spaces, as during a rotation.
 */
export function signatureHeader(
  secrets: readonly string[],
  id: string,
  timestamp: number,
  body: string,
): string {
  return secrets
    .map((secret) => {
      const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
      return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
    })
    .join(' ');
}

/**
 * The Standard Webhooks headers of one attempt to deliver event `id` (decimal digits) with `body`, the
 * Event JSON as getEvent sends it, at `timestamp` (Unix seconds). The sender adds content-type and
 * user-agent.
 */
export function webhookHeaders(
  secrets: readonly string[],
  id: string,
  timestamp: number,
  body: string,
): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatureHeader(secrets, id, timestamp, body),
  };
}
