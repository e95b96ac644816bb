import type { Socket } from 'node:net';
import { ApiError } from './errors.js';

// Codes Node gives a request that ran out of time: the client is not listening, so no answer is owed.
const TIMEOUTS = new Set(['ERR_HTTP_REQUEST_TIMEOUT', 'ERR_HTTP_HEADERS_TIMEOUT']);

/**
 * Answers bytes that never became a request (a garbage request line, conflicting Content-Length
 * headers, NUL in a header, an oversized head): Node's parser refuses them before Fastify sees a
 * request, so they get the Error body here, written raw, and the connection is closed.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  if (!socket.writable || error.code === 'ECONNRESET' || TIMEOUTS.has(error.code ?? '')) {
    socket.destroy();
    return;
  }
  const message =
    error.code === 'HPE_HEADER_OVERFLOW' ? 'the request head is too large' : 'the request is not valid HTTP';
  const body = JSON.stringify(new ApiError('invalid_request', message).toBody());
  socket.end(
    [
      'HTTP/1.1 400 Bad Request',
      'Content-Type: application/json; charset=utf-8',
      `Content-Length: ${Buffer.byteLength(body)}`,
      'X-Content-Type-Options: nosniff',
      'Connection: close',
      '',
      body,
    ].join('\r\n'),
  );
}
