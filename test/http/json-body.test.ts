import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiError } from '../../src/http/request/errors.js';
import { parseJsonBody, parseJsonNumber } from '../../src/http/request/json-body.js';

const body = (text: string) => Buffer.from(text, 'utf8');

/** Asserts that parsing throws a 400 invalid_request ApiError, and returns its message. */
function refusal(input: Buffer): string {
  let thrown: unknown;
  try {
    parseJsonBody(input);
  } catch (error) {
    thrown = error;
  }
  assert.ok(thrown instanceof ApiError, `expected an ApiError, got ${String(thrown)}`);
  assert.equal(thrown.code, 'invalid_request');
  assert.equal(thrown.statusCode, 400);
  return thrown.message;
}

describe('parseJsonNumber', () => {
  test('when an integer literal fits in a safe integer, then it is a number', () => {
    for (const [text, value] of [
      ['0', 0],
      ['1', 1],
      ['-1', -1],
      ['42', 42],
      ['9007199254740991', 9007199254740991],
      ['-9007199254740991', -9007199254740991],
    ] as const) {
      assert.equal(parseJsonNumber(text), value, text);
    }
  });

  test('when an integer literal is beyond 2^53, then it is the exact bigint', () => {
    for (const [text, value] of [
      ['9007199254740993', 9007199254740993n],
      ['-9007199254740993', -9007199254740993n],
      ['9223372036854775807', 9223372036854775807n],
      ['-9223372036854775808', -9223372036854775808n],
      ['123456789012345678901234567890', 123456789012345678901234567890n],
    ] as const) {
      assert.equal(parseJsonNumber(text), value, text);
    }
  });

  test('when a literal has a fraction that is not an integer, then it stays that number', () => {
    assert.equal(parseJsonNumber('1.5'), 1.5);
    assert.equal(parseJsonNumber('-2.25'), -2.25);
    assert.equal(parseJsonNumber('1e-3'), 0.001);
    assert.equal(parseJsonNumber('-1.25e1'), -12.5);
  });

  test('when a fraction or exponent literal lands on an integer, then it is NaN', () => {
    for (const text of [
      '1.0',
      '1e2',
      '1E2',
      '1e+2',
      '1e-400',
      '9007199254740993.5',
      '-0.0',
      '0e0',
      '2.5E1',
    ]) {
      assert.ok(Number.isNaN(parseJsonNumber(text)), `${text} gave ${String(parseJsonNumber(text))}`);
    }
  });
});

describe('parseJsonBody', () => {
  test('when the body is a JSON object, then it is parsed with exact integers', () => {
    assert.deepEqual(
      parseJsonBody(body('{"name":"Rex","categoryId":9007199254740993,"n":[1,1.5,"x",true,null]}')),
      { name: 'Rex', categoryId: 9007199254740993n, n: [1, 1.5, 'x', true, null] },
    );
  });

  test('when an integer-valued exponent literal is in the body, then it arrives as NaN, never as an integer', () => {
    const parsed = parseJsonBody(body('{"categoryId":1e-400,"other":9007199254740993.5}')) as Record<
      string,
      unknown
    >;
    assert.ok(Number.isNaN(parsed.categoryId));
    assert.ok(Number.isNaN(parsed.other));
  });

  test('when the body is not valid UTF-8, then it is refused with invalid_request', () => {
    for (const bytes of [
      [0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d], // {"a":"<FF>"}
      [0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc0, 0xaf, 0x22, 0x7d], // overlong encoding of '/'
      [0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d], // a UTF-8-encoded surrogate
      [0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xe2, 0x82, 0x22, 0x7d], // truncated sequence
    ]) {
      assert.equal(refusal(Buffer.from(bytes)), 'request body is not valid UTF-8');
    }
  });

  test('when the body is empty, then it is refused with invalid_request', () => {
    assert.equal(refusal(Buffer.alloc(0)), 'request body is required');
  });

  test('when the body is not JSON, then it is refused with invalid_request naming JSON', () => {
    for (const text of ['{', '{"a":}', "{'a':1}", 'nope', '{"a":1,}', '[1 2]']) {
      assert.match(refusal(body(text)), /^request body is not valid JSON/, text);
    }
  });

  test('when a key appears twice with different values, then the body is refused', () => {
    assert.match(refusal(body('{"name":"Rex","name":"Max"}')), /^request body is not valid JSON/);
    assert.match(refusal(body('{"a":{"b":1,"b":2}}')), /^request body is not valid JSON/);
  });

  test('when the body has a __proto__ key, then it is an own property and Object.prototype is untouched', () => {
    const parsed = parseJsonBody(
      body('{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted2":true}},"a":1}'),
    ) as Record<string, unknown>;
    assert.equal(Object.hasOwn(parsed, '__proto__'), true);
    assert.deepEqual(Object.getOwnPropertyDescriptor(parsed, '__proto__')?.value, { polluted: true });
    assert.equal(Object.getPrototypeOf(parsed), Object.prototype);
    assert.equal(parsed.polluted, undefined);
    assert.equal(parsed.a, 1);
    assert.equal(Object.hasOwn(parsed, 'constructor'), true);
    const fresh: Record<string, unknown> = {};
    assert.equal(fresh.polluted, undefined);
    assert.equal(fresh.polluted2, undefined);
    assert.equal(Object.hasOwn(Object.prototype, 'polluted'), false);
    assert.equal(Object.hasOwn(Object.prototype, 'polluted2'), false);
  });

  test('when the body is nested very deeply, then it is refused with an ApiError, not a crash', () => {
    for (const text of [
      '['.repeat(100_000),
      `${'['.repeat(100_000)}${']'.repeat(100_000)}`,
      `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`,
    ]) {
      assert.match(refusal(body(text)), /^request body is not valid JSON/);
    }
  });
});
