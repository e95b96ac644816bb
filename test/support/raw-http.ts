import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { assertErrorAnswer, type ErrorMessage } from './error-body.js';

/** A response read off the socket byte for byte: nothing between the test and the wire. */
export interface RawHttpResponse {
  status: number;
  /** Lower-case names; repeated fields joined with ", ". */
  headers: Record<string, string>;
  body: string;
  /** The body's bytes as sent (a compressed body is not text). */
  bytes: Buffer;
}

const DEADLINE_MS = 30_000;

function decodeChunked(data: Buffer): Buffer {
  const parts: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', offset);
    if (lineEnd < 0) break;
    const size = Number.parseInt(data.subarray(offset, lineEnd).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0) break;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    offset = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}

/**
 * Sends `request` exactly as given (it should say `Connection: close`) to the server at `url` and
 * reads the first response until the server closes the connection.
 */
export function sendRaw(url: string, request: string | Buffer): Promise<RawHttpResponse> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = connect(Number(port), hostname, () => {
      // Not end(): a half-closed connection may be dropped before it is answered. The request says
      // Connection: close, so the server closes it once it has answered.
      socket.write(typeof request === 'string' ? Buffer.from(request, 'latin1') : request);
    });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('no complete response before the deadline'));
    }, DEADLINE_MS);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      try {
        resolve(parseRawResponse(Buffer.concat(chunks)));
      } catch (error) {
        reject(error);
      }
    });
  });
}

/** Reads the first response out of the bytes a server sent; throws when they are not one (e.g. none). */
export function parseRawResponse(data: Buffer): RawHttpResponse {
  const headEnd = data.indexOf('\r\n\r\n');
  if (headEnd < 0) throw new Error(`not an HTTP response: ${JSON.stringify(data.toString('latin1'))}`);
  const [statusLine, ...fields] = data.subarray(0, headEnd).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1]);
  const headers: Record<string, string> = {};
  for (const field of fields) {
    const colon = field.indexOf(':');
    const name = field.slice(0, colon).trim().toLowerCase();
    const value = field.slice(colon + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  let body: Buffer = data.subarray(headEnd + 4);
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) body = decodeChunked(body);
  else if (headers['content-length'] !== undefined)
    body = body.subarray(0, Number(headers['content-length']));
  return { status, headers, body: body.toString('utf8'), bytes: body };
}

/** Asserts an Error answer read off the wire (assertErrorAnswer), with nosniff. */
export function assertRawError(
  res: RawHttpResponse,
  status: number,
  code: string,
  message?: ErrorMessage,
): void {
  assertErrorAnswer(
    { status: res.status, contentType: res.headers['content-type'], text: res.body },
    status,
    code,
    message,
  );
  assert.equal(res.headers['x-content-type-options'], 'nosniff');
}
