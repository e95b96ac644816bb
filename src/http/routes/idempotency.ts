import { Type } from 'typebox';
import { PATTERN_MESSAGE } from '../request/validation.js';

/**
 * The Idempotency-Key request header (draft-ietf-httpapi-idempotency-key-header). The draft makes it a
 * Structured Field string (`"…"`); Stripe's clients send the bare value. Both are accepted and mean
 * the same key. 1 to 255 visible ASCII characters; anything else is a 400.
 */
export const IdempotencyKeyHeaders = Type.Object(
  {
    'idempotency-key': Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        pattern: '^[\\x21-\\x7E]+$',
        [PATTERN_MESSAGE]: 'must be visible ASCII characters only (no spaces, no control characters)',
        description:
          'Makes the request safe to retry: within 24 hours, the same key with the same body returns the ' +
          'first `201` and what it created (with `Idempotent-Replayed: true`) and changes nothing; the same ' +
          'key with another body is a `422`. Keys are scoped to the API key that sent them and to the ' +
          'operation. 1 to 255 visible ASCII characters, bare or as a Structured Field string (`"…"`); a ' +
          'UUID is a good choice.',
      }),
    ),
  },
  { additionalProperties: true },
);

/** The key a client sent, with the Structured Field string's quotes taken off. */
export function idempotencyKeyOf(header: string): string {
  const quoted = /^"([^"\\]+)"$/.exec(header);
  return quoted ? (quoted[1] as string) : header;
}
