import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import {
  ConflictError,
  IdempotencyKeyReusedError,
  InvalidCursorError,
  StorageUnavailableError,
  UnknownReferenceError,
} from '../../domain/errors.js';
import { InvalidEndpointError } from '../../domain/webhooks.js';
import { setCommonHeaders } from '../observability/request-id.js';
import { ERROR_STATUS, type ErrorBody, type ErrorCode } from '../schemas/error.js';

/** An error meant for the client: its code, message and status are sent as they are. */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly statusCode: number;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.code = code;
    this.statusCode = ERROR_STATUS[code];
    this.headers = headers;
  }

  toBody(): ErrorBody {
    return { code: this.code, message: this.message, status: this.statusCode };
  }
}

/**
 * Seconds a client is asked to wait (Retry-After) when the service cannot serve it now: the database
 * is away or the node is overloaded. Long enough for a restart or a failover to be under way.
 */
export const RETRY_AFTER_SECONDS = 5;

/** 503 unavailable with Retry-After: nothing is wrong with the request; try it again shortly. */
export function unavailable(message: string): ApiError {
  return new ApiError('unavailable', message, { 'Retry-After': String(RETRY_AFTER_SECONDS) });
}

/**
 * Fastify's own errors and its plugins', by code, turned into ours. The message of each is ours too:
 * never internals.
 */
const FASTIFY_ERRORS: Record<string, [ErrorCode, string, Record<string, string>?]> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ['unsupported_media_type', 'request body must be application/json'],
  FST_ERR_CTP_INVALID_TYPE: ['unsupported_media_type', 'request body must be application/json'],
  FST_ERR_CTP_BODY_TOO_LARGE: ['payload_too_large', 'request body is too large'],
  FST_ERR_CTP_EMPTY_JSON_BODY: ['invalid_request', 'request body is required'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ['invalid_request', 'Content-Length does not match the body'],
  FST_ERR_BAD_URL: ['invalid_request', 'the request URL is malformed'],
  FST_ERR_ASYNC_CONSTRAINT: ['invalid_request', 'the request could not be routed'],
};

/** The one mapping from anything thrown while serving a request to an Error body. */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (
    error instanceof InvalidCursorError ||
    error instanceof UnknownReferenceError ||
    error instanceof InvalidEndpointError
  )
    return new ApiError('invalid_request', error.message);
  if (error instanceof ConflictError) return new ApiError('conflict', error.message);
  if (error instanceof StorageUnavailableError)
    return unavailable('the database is unavailable; retry after a few seconds');
  if (error instanceof IdempotencyKeyReusedError)
    return new ApiError('idempotency_key_reused', error.message);
  const fastifyError = error as Partial<FastifyError>;
  if (fastifyError.validation)
    return new ApiError('invalid_request', fastifyError.message ?? 'invalid request');
  const known = fastifyError.code ? FASTIFY_ERRORS[fastifyError.code] : undefined;
  if (known) return new ApiError(...known);
  const status = fastifyError.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    const code = (Object.keys(ERROR_STATUS) as ErrorCode[]).find((c) => ERROR_STATUS[c] === status);
    return new ApiError(code ?? 'invalid_request', 'the request could not be processed');
  }
  return new ApiError('internal_error', 'an unexpected error occurred');
}

export function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  // The common headers here too: errors raised before routing (frameworkErrors) skip the hooks.
  return setCommonHeaders(reply).code(error.statusCode).headers(error.headers).send(error.toBody());
}

/** Installs the error handler, the not-found handler and the 405 logic on the root instance. */
export const errorHandling = fp(
  async (app: FastifyInstance) => {
    app.setErrorHandler((error: unknown, request: FastifyRequest, reply: FastifyReply) => {
      const apiError = toApiError(error);
      // An unavailable database is logged once per outage (StorageOutage), not with a stack per request.
      if (apiError.code === 'internal_error') request.log.error({ err: error }, 'request failed');
      return sendError(reply, apiError);
    });
  },
  { name: 'error-handling', fastify: '5.x' },
);
