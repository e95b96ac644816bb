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
