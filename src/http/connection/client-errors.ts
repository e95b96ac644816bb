import { type IncomingMessage, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { ApiError } from '../request/errors.js';
import { closeLingering } from './lingering-close.js';

// Node gives a request that ran out of time (its headers or its whole request) this code.
const TIMEOUTS = new Set(['ERR_HTTP_REQUEST_TIMEOUT', 'ERR_HTTP_HEADERS_TIMEOUT']);

/** What Node's server keeps on a socket while a response is in progress (it is Node's own check too). */
type HttpSocket = Socket & { _httpMessage?: { headersSent: boolean } | null };

/**
 * Answers what never became a complete request: bytes Node's parser refuses before Fastify sees a
 * request (a garbage request line, conflicting Content-Length headers, NUL in a header, an oversized
 * head), and a client too slow to send its headers or its whole request (docs/api.md "Slow clients":
 * 408). Each gets the Error body, written raw, and the connection is closed.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: HttpSocket): void {
  // Nothing to answer: the peer is gone, a response is already on the wire, or (a timeout of a
  // connection that never sent a byte) nobody asked anything.
  const timedOut = TIMEOUTS.has(error.code ?? '');
  if (
    !socket.writable ||
    error.code === 'ECONNRESET' ||
    socket._httpMessage?.headersSent ||
    (timedOut && socket.bytesRead === 0)
  ) {
    socket.destroy();
    return;
  }
  answerRaw(socket, timedOut ? new ApiError('request_timeout', timeoutMessage(socket)) : parserError(error));
}

function timeoutMessage(socket: HttpSocket): string {
  return socket._httpMessage
    ? 'the request body did not arrive in time'
    : 'the request headers did not arrive in time';
}

function parserError(error: NodeJS.ErrnoException): ApiError {
  return error.code === 'HPE_HEADER_OVERFLOW'
    ? new ApiError(
        'request_header_fields_too_large',
        'the request head (line and headers) is larger than 16 KiB',
      )
    : new ApiError('invalid_request', 'the request is not valid HTTP');
}

/**
 * CONNECT asks for a tunnel, which only a proxy gives. Node hands it to a 'connect' listener, or
 * with none drops the connection without a word; it gets the Error body instead.
 */
export function answerConnect(_request: IncomingMessage, socket: Socket): void {
  answerRaw(socket, new ApiError('invalid_request', 'CONNECT is not supported: this service is not a proxy'));
}

/**
 * Writes `error` as a complete response straight to the socket, then closes the connection in stages:
 * a client still sending (a trickler is) would otherwise get a reset that can destroy the answer.
 */
export function answerRaw(socket: Socket, error: ApiError): void {
  const body = JSON.stringify(error.toBody());
  socket.write(
    [
      `HTTP/1.1 ${error.statusCode} ${STATUS_CODES[error.statusCode]}`,
      'Content-Type: application/json; charset=utf-8',
      `Content-Length: ${Buffer.byteLength(body)}`,
      'X-Content-Type-Options: nosniff',
      ...Object.entries(error.headers).map(([name, value]) => `${name}: ${value}`),
      'Connection: close',
      '',
      body,
    ].join('\r\n'),
  );
  closeLingering(socket);
}
