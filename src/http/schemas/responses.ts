import type { FastifyInstance } from 'fastify';
import { type TSchema, Type } from 'typebox';
import { ERROR_STATUS, type ErrorBody, type ErrorCode } from './error.js';

/**
 * A documented response: its description and headers are lifted into the OpenAPI document by
 * @fastify/swagger, as is an `examples` keyword of its schema; the schema drives serialisation with
 * fast-json-stringify.
 */
export function response(description: string, schema: TSchema, headers: Record<string, TSchema> = {}) {
  return Type.Unsafe({ ...schema, description, ...(Object.keys(headers).length ? { headers } : {}) });
}

/** The `Retry-After` header of a 429 or 503, as documented. */
export const RetryAfterHeader = Type.String({ description: 'Seconds to wait before trying again.' });

/** For each code an error response may carry, a message the service really sends with it. */
export type ErrorExamples = Partial<Record<ErrorCode, string>>;

/**
 * An error response, documented with the Error body of each of its codes as an example (its own code
 * and status, so a docs page never shows a 429 as `invalid_request` 400). One code: the example;
 * several: named examples, one per code.
 */
export function errorResponse(
  description: string,
  messages: ErrorExamples,
  headers?: Record<string, TSchema>,
) {
  const bodies = (Object.entries(messages) as [ErrorCode, string][]).map(
    ([code, message]): ErrorBody => ({ code, message, status: ERROR_STATUS[code] }),
  );
  const examples =
    bodies.length === 1
      ? { examples: bodies }
      : {
          'x-examples': Object.fromEntries(
            bodies.map((body) => [body.code, { summary: `${body.status} ${body.code}`, value: body }]),
          ),
        };
  return response(
    `${description} (code: ${bodies.map((body) => `\`${body.code}\``).join(', ')})`,
    Type.Unsafe({ $ref: 'Error#', ...examples }),
    headers,
  );
}

/**
 * The `default` response of a /v1 operation: the errors any of them may answer that no status of its
 * own lists. `allowed`: the methods of the operation's path, as a 405 lists them.
 */
export const otherErrors = (allowed: string) =>
  errorResponse('Any other error', {
    method_not_allowed: `DELETE is not allowed here; use ${allowed}`,
    expectation_failed: 'the only expectation this service meets is Expect: 100-continue',
    request_header_fields_too_large: 'the request head (line and headers) is larger than 16 KiB',
    internal_error: 'an unexpected error occurred',
  });

/** A 400, documented with one message the service really sends. */
export const invalid = (what: string, example: string) => errorResponse(what, { invalid_request: example });

/** The refusals of a request body as such, whatever the operation: too large, or not JSON once decoded. */
export const BODY_ERRORS = {
  413: errorResponse('Body larger than the configured limit (64 KiB by default), once decoded', {
    payload_too_large: 'request body is too large',
  }),
  415: errorResponse(
    'Body is not `application/json`, or its `Content-Encoding` is not gzip, deflate, br or identity, or it ' +
      'does not decode',
    { unsupported_media_type: 'request body must be application/json' },
    {
      'Accept-Encoding': Type.String({
        description: '`gzip, deflate, br` when the `Content-Encoding` was refused (RFC 9110 §12.5.3).',
      }),
    },
  ),
};

/**
 * Documents a shared answer (401, 429, 503) on every route added after this in the same context, from
 * the plugin whose hook gives that answer. Integer-like keys keep ascending order in a JavaScript
 * object, so the merged responses stay in status order with `default` last.
 */
export function documentOnEveryRoute(app: FastifyInstance, responses: Record<number, TSchema>): void {
  app.addHook('onRoute', (route) => {
    const own = route.schema?.response as Record<string, unknown> | undefined;
    if (!own) return; // an undocumented route (the CORS preflight) stays undocumented
    route.schema = { ...route.schema, response: { ...own, ...responses } };
  });
}
