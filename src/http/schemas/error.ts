import { type Static, Type } from 'typebox';

/**
 * docs/api.md: the stable error codes, each with the one HTTP status it travels with. Two are this
 * service's additions (docs/api.md, API decisions), for answers HTTP prescribes that no listed code can
 * carry with its own status: `expectation_failed` (417, RFC 9110 §10.1.1) and
 * `request_header_fields_too_large` (431, RFC 6585 §5).
 */
export const ERROR_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  conflict: 409,
  gone: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  expectation_failed: 417,
  idempotency_key_reused: 422,
  rate_limited: 429,
  request_header_fields_too_large: 431,
  internal_error: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** Each status has exactly one code: what a response's status says its Error body's code is. */
export const ERROR_CODE_BY_STATUS: ReadonlyMap<number, ErrorCode> = new Map(
  (Object.entries(ERROR_STATUS) as [ErrorCode, number][]).map(([code, status]) => [status, code]),
);

export const ErrorBody = Type.Object(
  {
    code: Type.Unsafe<ErrorCode>({
      type: 'string',
      enum: Object.keys(ERROR_STATUS),
      description: 'Machine-readable error code; the list is closed and stable within v1.',
    }),
    message: Type.String({
      description: 'Human-readable description; for a 400 it names every offending field.',
    }),
    status: Type.Integer({ minimum: 400, maximum: 599, description: 'The HTTP status code, repeated.' }),
  },
  { $id: 'Error', additionalProperties: false, description: 'The body of every error response.' },
);

export type ErrorBody = Static<typeof ErrorBody>;
