import { type TSchema, Type } from 'typebox';
import type { ErrorCode } from './error.js';

/**
 * A documented response: its description and headers are lifted into the OpenAPI document by
 * @fastify/swagger; the schema drives serialisation with fast-json-stringify.
 */
export function response(description: string, schema: TSchema, headers: Record<string, TSchema> = {}) {
  return Type.Unsafe({ ...schema, description, ...(Object.keys(headers).length ? { headers } : {}) });
}

export const errorResponse = (description: string, codes: ErrorCode[], headers?: Record<string, TSchema>) =>
  response(
    `${description} (code: ${codes.map((c) => `\`${c}\``).join(', ')})`,
    Type.Unsafe({ $ref: 'Error#' }),
    headers,
  );

export const LinkHeader = (description: string) => Type.String({ description });
