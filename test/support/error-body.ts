import assert from 'node:assert/strict';
import type { ErrorBody } from '../../src/http/schemas/error.js';

/**
 * What an Error body's message must say: exactly this text, a match of this pattern, or the fields
 * and parameters it must name (each as a whole word: DECISIONS.md, a 400 names every offending one).
 */
export type ErrorMessage = string | RegExp | { names: readonly string[] };

/** An answer however it was read: through fetch (a TestResponse) or off the wire. */
export interface ErrorAnswer {
  status: number;
  contentType: string | null | undefined;
  text: string;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The one Error-body assertion: the status, the JSON media type, exactly {code, message, status} with
 * `status` equal to the HTTP status, and the message when one is expected (a message is never empty).
 */
export function assertErrorAnswer(
  answer: ErrorAnswer,
  status: number,
  code: string,
  message?: ErrorMessage,
  what = '',
): ErrorBody {
  const context = `${what ? `${what}: ` : ''}${answer.status} ${answer.text}`;
  assert.equal(answer.status, status, context);
  assert.equal(answer.contentType, 'application/json; charset=utf-8', context);
  const body = JSON.parse(answer.text) as ErrorBody;
  assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'status'], context);
  assert.equal(body.code, code, context);
  assert.equal(body.status, answer.status, `${context}: the body's status is the HTTP status`);
  assert.ok(typeof body.message === 'string' && body.message.trim().length > 0, context);
  if (typeof message === 'string') assert.equal(body.message, message, context);
  else if (message instanceof RegExp) assert.match(body.message, message, context);
  else if (message)
    for (const name of message.names)
      assert.match(
        body.message,
        new RegExp(`(^|[^\\w])${escapeRegExp(name === '' ? '(empty name)' : name)}($|[^\\w])`),
        `${context}: the message names ${JSON.stringify(name)}`,
      );
  return body;
}

/** assertErrorAnswer for a response read through fetch (server.request, rawRequest). */
export function assertError(
  res: { status: number; headers: Headers; text: string },
  status: number,
  code: string,
  message?: ErrorMessage,
  what?: string,
): ErrorBody {
  return assertErrorAnswer(
    { status: res.status, contentType: res.headers.get('content-type'), text: res.text },
    status,
    code,
    message,
    what,
  );
}
