// What the two idempotent creates, createPet (POST /v1/pets) and placeOrder (POST /v1/store/orders),
// share: the request headers they take, their 201 and 422 as documented, the key read from a request,
// and the 201 sent.
import type { FastifyReply } from 'fastify';
import { type TSchema, Type } from 'typebox';
import { IdempotencyKeyReusedError } from '../../domain/errors.js';
import { ContentEncodingHeader } from '../request/content-coding.js';
import { errorResponse, response } from '../schemas/responses.js';
import { IdempotencyKeyHeaders, idempotencyKeyOf } from './idempotency.js';

/** The request headers of an idempotent create: the Idempotency-Key, and the body's Content-Encoding. */
export const IdempotentCreateHeaders = Type.Object(
  { ...IdempotencyKeyHeaders.properties, 'content-encoding': ContentEncodingHeader },
  { additionalProperties: true },
);

/**
 * The answers an idempotent create documents of its own: the `201` (`description`, the created
 * resource's `schema`, its `Location`, and `Idempotent-Replayed` on a stored answer) and the `422` of
 * a key used again with another body. `what` names the resource in the Location's description.
 */
export function idempotentCreateResponses(description: string, schema: TSchema, what: string) {
  return {
    201: response(description, schema, {
      Location: Type.String({ description: `Address of the new ${what}.` }),
      'Idempotent-Replayed': Type.String({
        description: '`true` when this is the stored answer to an earlier request with the same key.',
      }),
    }),
    422: errorResponse('The `Idempotency-Key` was already used with a different body', {
      idempotency_key_reused: new IdempotencyKeyReusedError().message,
    }),
  };
}

/** The Idempotency-Key a request sent, without a Structured Field string's quotes; undefined if none. */
export function requestIdempotencyKey(headers: {
  'idempotency-key'?: string | undefined;
}): string | undefined {
  const key = headers['idempotency-key'];
  return key === undefined ? undefined : idempotencyKeyOf(key);
}

/**
 * The `201` of an idempotent create: what was created, where it is, and (Stripe's header, which lets a
 * client and its logs tell the stored answer from a new creation) `Idempotent-Replayed: true` when it
 * is the stored answer to an earlier request with the same key.
 */
export function sendCreated(reply: FastifyReply, location: string, created: unknown, replayed: boolean) {
  if (replayed) reply.header('Idempotent-Replayed', 'true');
  return reply.code(201).header('Location', location).send(created);
}
