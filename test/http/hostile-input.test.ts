import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { after, backends, before, httpLayerBackends, test } from '../support/backends.js';
import { integrityCheck, storedPets, tableNames } from '../support/db-inspect.js';
import { assertError } from '../support/error-body.js';
import { walkLinks } from '../support/paging.js';
import { assertRawError, parseRawResponse, type RawHttpResponse, sendRaw } from '../support/raw-http.js';
import { parseExact, rawRequest } from '../support/raw-json.js';
import { startTestServer, TEST_KEY, type TestResponse, type TestServer } from '../support/test-server.js';

/**
 * What an attacker sends: prototype-poisoning keys, deep or huge JSON, bad bytes, SQL metacharacters
 * in every field, parameter and header, odd numbers, duplicate keys, odd headers and queries. Each gets
 * a clear Error body, or, where it is a valid name, is stored exactly as sent. After every request the
 * store is read back: nothing half-stored, nothing extra. At the end the tables are read directly.
 */

interface Pet {
  id: number | bigint;
  name: string;
  categoryId: number | bigint;
  status: string;
}

const NAME_RULE = 'name must not be blank nor contain control characters or unpaired surrogates';
const STATUS_RULE = 'status must be one of available, pending, sold';
const NOT_INTEGER = 'categoryId must be an integer';
const NOT_JSON = 'request body is not valid JSON: ';
const NOT_UTF8 = 'request body is not valid UTF-8';
const NOT_JSON_MEDIA = 'request body must be application/json';
const CURSOR_INVALID = 'cursor is not valid';
const BAD_KEY = 'the API key is not valid';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** SQL metacharacters and injection attempts, each a valid name too. */
const SQL_STRINGS = [
  "' OR 1=1 --",
  '"; DROP TABLE pets; --',
  "Robert'); DROP TABLE pets;--",
  "' UNION SELECT id, hash, hint, name FROM api_keys --",
  '%',
  '_',
  '\\',
  '%_\\%',
  '$1',
  '?',
  ':name',
  '/* comment */',
  "'; SELECT pg_sleep(10); --",
  '1; DELETE FROM pets',
];

type Expectation =
  | { error: [status: number, code: string, message: string] }
  | { created: { name: string; categoryId: number | bigint; status: string } };

interface BodyCase {
  when: string;
  body: string | Buffer;
  contentType?: string;
  contentEncoding?: string;
  expect: Expectation;
}

const utf8 = (...parts: (string | number[])[]): Buffer =>
  Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part) : Buffer.from(part))));
const invalid = (message: string): Expectation => ({ error: [400, 'invalid_request', message] });
const created = (name: string, categoryId: number | bigint = 1, status = 'available'): Expectation => ({
  created: { name, categoryId, status },
});

const manyKeys = Array.from({ length: 2000 }, (_, i) => `k${i}`);
const mostKeys = Array.from({ length: 6500 }, (_, i) => `k${i.toString(36)}`);
/** A 400 names the first five unknown properties and counts the rest: a short message, not 200 KB. */
const unknownProperties = (keys: string[]) =>
  `${keys
    .slice(0, 5)
    .map((k) => `${k} is not a known property`)
    .join('; ')}; and ${keys.length - 5} more unknown properties`;
const longKey = `k${'x'.repeat(30_000)}`;

const BODY_CASES: BodyCase[] = [
  // Prototype poisoning
  {
    when: '__proto__ carries a whole valid pet',
    body: '{"__proto__":{"name":"Rex","categoryId":1}}',
    expect: invalid('name is required; categoryId is required; __proto__ is not a known property'),
  },
  {
    when: '__proto__ is null next to valid fields',
    body: '{"name":"Rex","categoryId":1,"__proto__":null}',
    expect: invalid('__proto__ is not a known property'),
  },
  {
    when: '__proto__ is nested in __proto__',
    body: '{"name":"Rex","categoryId":1,"__proto__":{"__proto__":{"polluted":"yes"}}}',
    expect: invalid('__proto__ is not a known property'),
  },
  {
    when: '__proto__ is written with a \\u escape',
    body: '{"name":"Rex","\\u005f_proto__":{"polluted":"yes"},"categoryId":1}',
    expect: invalid('__proto__ is not a known property'),
  },
  {
    when: 'constructor.prototype carries a value',
    body: '{"constructor":{"prototype":{"polluted":"yes"}},"name":"Rex","categoryId":1}',
    expect: invalid('constructor is not a known property'),
  },
  {
    when: 'prototype is sent',
    body: '{"name":"Rex","categoryId":1,"prototype":{"polluted":"yes"}}',
    expect: invalid('prototype is not a known property'),
  },
  {
    when: 'status is an object holding __proto__',
    body: '{"name":"Rex","categoryId":1,"status":{"__proto__":{"polluted":"yes"}}}',
    expect: invalid(`status must be a string; ${STATUS_RULE}`),
  },
  {
    when: 'categoryId is an object holding __proto__',
    body: '{"name":"Rex","categoryId":{"__proto__":[]}}',
    expect: invalid(NOT_INTEGER),
  },
  ...['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '__defineGetter__'].map(
    (name): BodyCase => ({
      when: `name is "${name}"`,
      body: JSON.stringify({ name, categoryId: 1 }),
      expect: created(name),
    }),
  ),
  // Deep and huge
  {
    when: 'an unknown property is nested 500 arrays deep',
    body: `{"name":"Rex","categoryId":1,"x":${'['.repeat(500)}${']'.repeat(500)}}`,
    expect: invalid('x is not a known property'),
  },
  {
    when: 'an unknown property is nested 20000 arrays deep (within the body limit)',
    body: `{"name":"Rex","categoryId":1,"x":${'['.repeat(20_000)}${']'.repeat(20_000)}}`,
    expect: invalid(`${NOT_JSON}it is nested too deeply`),
  },
  {
    when: 'an unknown property is nested 9000 objects deep',
    body: `{"name":"Rex","categoryId":1,"x":${'{"a":'.repeat(9000)}1${'}'.repeat(9000)}}`,
    expect: invalid(`${NOT_JSON}it is nested too deeply`),
  },
  {
    when: 'categoryId is an array of 20000 numbers',
    body: `{"name":"Rex","categoryId":[${Array(20_000).fill(1).join(',')}]}`,
    expect: invalid(NOT_INTEGER),
  },
  {
    when: 'name is 60000 characters long',
    body: JSON.stringify({ name: 'a'.repeat(60_000), categoryId: 1 }),
    expect: invalid('name must be at most 255 characters long'),
  },
  {
    when: 'the body has 2000 unknown properties',
    body: `{"name":"Rex","categoryId":1,${manyKeys.map((k) => `"${k}":0`).join(',')}}`,
    expect: invalid(unknownProperties(manyKeys)),
  },
  {
    when: 'the body has 6500 unknown properties (just under 64 KiB)',
    body: `{"name":"Rex","categoryId":1,${mostKeys.map((k) => `"${k}":0`).join(',')}}`,
    expect: invalid(unknownProperties(mostKeys)),
  },
  {
    when: 'a property name is 30000 characters long',
    body: JSON.stringify({ name: 'Rex', categoryId: 1, [longKey]: 1 }),
    expect: invalid(`${longKey} is not a known property`),
  },
  // Bytes and characters
  {
    when: 'the body has an overlong UTF-8 NUL (C0 80)',
    body: utf8('{"name":"a', [0xc0, 0x80], 'b","categoryId":1}'),
    expect: invalid(NOT_UTF8),
  },
  {
    when: 'the body has a 0xFE byte',
    body: utf8('{"name":"a', [0xfe], '","categoryId":1}'),
    expect: invalid(NOT_UTF8),
  },
  {
    when: 'the body is UTF-16 declared as charset=utf-16',
    body: Buffer.from('{"name":"U16","categoryId":1}', 'utf16le'),
    contentType: 'application/json; charset=utf-16',
    expect: invalid(`${NOT_JSON}Quoted object key expected but got '\u0000' at position 1`),
  },
  {
    when: 'the body starts with a UTF-8 byte order mark',
    body: utf8([0xef, 0xbb, 0xbf], '{"name":"BOM","categoryId":1}'),
    expect: created('BOM'),
  },
  {
    when: 'a raw NUL byte is inside the name string',
    body: utf8('{"name":"Re', [0x00], 'x","categoryId":1}'),
    expect: invalid(`${NOT_JSON}Invalid character '\u0000' at position 11`),
  },
  {
    when: 'a raw escape byte (0x1B) is inside the name string',
    body: utf8('{"name":"Re', [0x1b], 'x","categoryId":1}'),
    expect: invalid(`${NOT_JSON}Invalid character '\u001b' at position 11`),
  },
  {
    when: 'name holds an escaped NUL and an escaped ESC',
    body: '{"name":"a\\u0000\\u001b[31mb","categoryId":1}',
    expect: invalid(NAME_RULE),
  },
  {
    when: 'status holds an escaped NUL after a valid value',
    body: '{"name":"Rex","categoryId":1,"status":"sold\\u0000"}',
    expect: invalid(STATUS_RULE),
  },
  {
    when: 'a property name holds an escaped NUL',
    body: '{"na\\u0000me":"Rex","categoryId":1}',
    expect: invalid('name is required; na\u0000me is not a known property'),
  },
  {
    when: 'name holds NEL (U+0085) and LINE SEPARATOR (U+2028), which are not C0 controls',
    body: JSON.stringify({ name: 'a\u0085b\u2028c', categoryId: 1 }),
    expect: created('a\u0085b\u2028c'),
  },
  // SQL metacharacters
  ...SQL_STRINGS.map(
    (name): BodyCase => ({
      when: `name is the SQL text ${JSON.stringify(name)}`,
      body: JSON.stringify({ name, categoryId: 7, status: 'sold' }),
      expect: created(name, 7, 'sold'),
    }),
  ),
  ...SQL_STRINGS.slice(0, 4).map(
    (text): BodyCase => ({
      when: `status is the SQL text ${JSON.stringify(text)}`,
      body: JSON.stringify({ name: 'Rex', categoryId: 1, status: text }),
      expect: invalid(STATUS_RULE),
    }),
  ),
  ...SQL_STRINGS.slice(0, 4).map(
    (text): BodyCase => ({
      when: `categoryId is the SQL text ${JSON.stringify(text)}`,
      body: JSON.stringify({ name: 'Rex', categoryId: text }),
      expect: invalid(NOT_INTEGER),
    }),
  ),
  {
    when: 'categoryId is the bare token sequence 1 OR 1=1',
    body: '{"name":"Rex","categoryId":1 OR 1=1}',
    expect: invalid(`${NOT_JSON}Comma ',' expected after value but got 'O' at position 29`),
  },
  {
    when: 'a property name is SQL',
    body: '{"name":"Rex","categoryId":1,"status = \'sold\' OR 1":1}',
    expect: invalid("status = 'sold' OR 1 is not a known property"),
  },
  // Numbers
  { when: 'categoryId is 1e400', body: '{"name":"Rex","categoryId":1e400}', expect: invalid(NOT_INTEGER) },
  { when: 'categoryId is -1e400', body: '{"name":"Rex","categoryId":-1e400}', expect: invalid(NOT_INTEGER) },
  {
    when: 'categoryId is -0 (an integer literal equal to 0)',
    body: '{"name":"Zero","categoryId":-0}',
    expect: created('Zero', 0),
  },
  {
    when: 'categoryId is 9223372036854775808',
    body: '{"name":"Rex","categoryId":9223372036854775808}',
    expect: invalid('categoryId must be at most 9223372036854775807'),
  },
  {
    when: 'categoryId has 1000 digits',
    body: `{"name":"Rex","categoryId":${'9'.repeat(1000)}}`,
    expect: invalid('categoryId must be at most 9223372036854775807'),
  },
  {
    when: 'categoryId is -9223372036854775808 (the int64 minimum)',
    body: '{"name":"Min","categoryId":-9223372036854775808}',
    expect: created('Min', -9223372036854775808n),
  },
  // Duplicate keys
  {
    when: 'name appears twice with the same value',
    body: '{"name":"Twice","name":"Twice","categoryId":1}',
    expect: created('Twice'),
  },
  {
    when: 'name appears twice with different values',
    body: '{"name":"Rex","name":"Max","categoryId":1}',
    expect: invalid(`${NOT_JSON}Duplicate key 'name' encountered at position 15`),
  },
  {
    when: 'name appears twice, once written with a \\u escape',
    body: '{"name":"Rex","n\\u0061me":"Max","categoryId":1}',
    expect: invalid(`${NOT_JSON}Duplicate key 'name' encountered at position 15`),
  },
  {
    when: 'status appears twice, sold then available',
    body: '{"name":"Rex","categoryId":1,"status":"sold","status":"available"}',
    expect: invalid(`${NOT_JSON}Duplicate key 'status' encountered at position 46`),
  },
  // Content-Type spellings
  ...[
    'APPLICATION/JSON',
    'Application/Json; Charset=UTF-8',
    'application/json ; charset=utf-8',
    'application/json;',
  ].map(
    (contentType): BodyCase => ({
      when: `Content-Type is "${contentType}"`,
      body: JSON.stringify({ name: `typed ${contentType}`, categoryId: 1 }),
      contentType,
      expect: created(`typed ${contentType}`),
    }),
  ),
  ...[
    'application/json, text/plain',
    'application/vnd.api+json',
    'application/problem+json',
    'application/jsonp',
    'application/*',
    '*/*',
    'json',
    'text/plain; x=application/json',
  ].map(
    (contentType): BodyCase => ({
      when: `Content-Type is "${contentType}"`,
      body: '{"name":"Rex","categoryId":1}',
      contentType,
      expect: { error: [415, 'unsupported_media_type', NOT_JSON_MEDIA] },
    }),
  ),
];

const CODING_NOT_ACCEPTED = 'Content-Encoding must be gzip, deflate, br or identity';
const NOT_DECODED = 'request body does not decode as its Content-Encoding says';
const notAccepted = (message: string): Expectation => ({ error: [415, 'unsupported_media_type', message] });
const pet = (name: string, categoryId = '1') =>
  Buffer.from(`{"name":${JSON.stringify(name)},"categoryId":${categoryId}}`);
/** Far past the 64 KiB limit once decoded, yet a few hundred bytes on the wire. */
const inflating = Buffer.from(`{"name":"${'x'.repeat(1_000_000)}","categoryId":1}`);

/** DECISIONS.md "Request bodies with a content coding". */
const CODING_CASES: BodyCase[] = [
  ...(
    [
      ['gzip', gzipSync],
      ['deflate', deflateSync],
      ['br', brotliCompressSync],
    ] as const
  ).flatMap(([coding, encode]): BodyCase[] => [
    {
      when: `a ${coding} body`,
      body: encode(pet(`coded ${coding}`)),
      contentEncoding: coding,
      expect: created(`coded ${coding}`),
    },
    {
      when: `a ${coding} body with a categoryId beyond 2^53`,
      body: encode(pet(`big ${coding}`, '9007199254740993')),
      contentEncoding: coding,
      expect: created(`big ${coding}`, 9007199254740993n),
    },
    {
      when: `a small ${coding} body that inflates past the 64 KiB limit`,
      body: encode(inflating),
      contentEncoding: coding,
      expect: { error: [413, 'payload_too_large', 'request body is too large'] },
    },
    {
      when: `Content-Encoding ${coding} on a plain JSON body`,
      body: pet('plain'),
      contentEncoding: coding,
      expect: notAccepted(NOT_DECODED),
    },
    {
      when: `a ${coding} body cut short`,
      body: encode(pet('cut')).subarray(0, 12),
      contentEncoding: coding,
      expect: notAccepted(NOT_DECODED),
    },
  ]),
  {
    when: 'Content-Encoding GZIP (codings are case-insensitive)',
    body: gzipSync(pet('upper GZIP')),
    contentEncoding: 'GZIP',
    expect: created('upper GZIP'),
  },
  {
    when: 'Content-Encoding identity',
    body: pet('identity'),
    contentEncoding: 'identity',
    expect: created('identity'),
  },
  {
    when: 'a gzip body of invalid JSON',
    body: gzipSync('{"name":'),
    contentEncoding: 'gzip',
    expect: invalid(`${NOT_JSON}Object value expected after ':' at position 8`),
  },
  ...['x-unknown', 'compress', 'zstd', 'gzip, br', 'gzip;q=1', '*'].map(
    (coding): BodyCase => ({
      when: `Content-Encoding ${coding}`,
      body: pet('unknown coding'),
      contentEncoding: coding,
      expect: notAccepted(CODING_NOT_ACCEPTED),
    }),
  ),
  {
    when: 'a body gzipped twice but labelled gzip once',
    body: gzipSync(gzipSync(pet('twice'))),
    contentEncoding: 'gzip',
    expect: invalid(NOT_UTF8),
  },
];

interface PathCase {
  when: string;
  path: string;
  headers?: Record<string, string>;
  /** An Error, or 'list' for a 200 equal to the whole list (the parameter is ignored). */
  expect: [status: number, code: string, message: string] | 'list';
}

const listError = (message: string): PathCase['expect'] => [400, 'invalid_request', message];

const PATH_CASES: PathCase[] = [
  // Repeated and bracketed parameters
  {
    when: 'limit is repeated (?limit=1&limit=2)',
    path: '/v1/pets?limit=1&limit=2',
    expect: listError('limit must be an integer'),
  },
  {
    when: 'limit is repeated with one value (?limit=1&limit=1)',
    path: '/v1/pets?limit=1&limit=1',
    expect: listError('limit must be an integer'),
  },
  {
    when: 'status is repeated',
    path: '/v1/pets?status=sold&status=pending',
    expect: listError(`status must be a string; ${STATUS_RULE}`),
  },
  {
    when: 'cursor is repeated',
    path: '/v1/pets?cursor=a&cursor=b',
    expect: listError('cursor must be a string'),
  },
  // Unknown parameters are refused, like unknown body properties: a typo must not silently widen a filter.
  {
    when: 'status is sent as status[]=sold (an unknown parameter)',
    path: '/v1/pets?status[]=sold',
    expect: listError('status[] is not a known parameter'),
  },
  {
    when: 'the parameter is spelt LIMIT',
    path: '/v1/pets?LIMIT=1',
    expect: listError('LIMIT is not a known parameter'),
  },
  {
    when: 'the query has __proto__ and constructor parameters',
    path: '/v1/pets?__proto__=x&constructor[prototype]=y',
    expect: listError('__proto__ is not a known parameter; constructor[prototype] is not a known parameter'),
  },
  {
    when: 'the query is only separators',
    path: '/v1/pets?&&&=',
    expect: listError('(empty name) is not a known parameter'),
  },
  {
    when: 'the query has 100 different unknown parameters',
    path: `/v1/pets?${Array.from({ length: 100 }, (_, i) => `p${i}=1`).join('&')}`,
    expect: listError(
      'p0 is not a known parameter; p1 is not a known parameter; p2 is not a known parameter; p3 is not a known parameter; p4 is not a known parameter; and 95 more unknown parameters',
    ),
  },
  {
    when: 'the query is 8 KB of unknown parameters',
    path: `/v1/pets?${'x=1&'.repeat(2000)}`,
    expect: listError('x is not a known parameter'),
  },
  // NUL, controls, bad encodings, unicode
  {
    when: 'limit is an encoded NUL',
    path: '/v1/pets?limit=%00',
    expect: listError('limit must be an integer'),
  },
  {
    when: 'status is sold followed by an encoded NUL',
    path: '/v1/pets?status=sold%00',
    expect: listError(STATUS_RULE),
  },
  { when: 'cursor is an encoded NUL', path: '/v1/pets?cursor=%00', expect: listError(CURSOR_INVALID) },
  {
    when: 'status is sold with an encoded line feed',
    path: '/v1/pets?status=sold%0A',
    expect: listError(STATUS_RULE),
  },
  {
    when: 'status is encoded invalid UTF-8 (%C3%28)',
    path: '/v1/pets?status=%C3%28',
    expect: listError(STATUS_RULE),
  },
  { when: 'status is an encoded 0xFF byte', path: '/v1/pets?status=%FF', expect: listError(STATUS_RULE) },
  { when: 'status is "söld" (unicode)', path: '/v1/pets?status=s%C3%B6ld', expect: listError(STATUS_RULE) },
  {
    when: 'cursor is an emoji',
    path: `/v1/pets?cursor=${encodeURIComponent('🐶')}`,
    expect: listError(CURSOR_INVALID),
  },
  {
    when: 'limit is written in fullwidth digits',
    path: `/v1/pets?limit=${encodeURIComponent('１０')}`,
    expect: listError('limit must be an integer'),
  },
  {
    when: 'limit has a leading encoded space',
    path: '/v1/pets?limit=%201',
    expect: listError('limit must be an integer'),
  },
  {
    when: 'limit has a plus sign',
    path: '/v1/pets?limit=%2B1',
    expect: listError('limit must be an integer'),
  },
  // SQL metacharacters in every parameter
  ...SQL_STRINGS.flatMap((text): PathCase[] => [
    {
      when: `limit is ${JSON.stringify(text)}`,
      path: `/v1/pets?limit=${encodeURIComponent(text)}`,
      expect: listError('limit must be an integer'),
    },
    {
      when: `status is ${JSON.stringify(text)}`,
      path: `/v1/pets?status=${encodeURIComponent(text)}`,
      expect: listError(STATUS_RULE),
    },
    {
      when: `cursor is ${JSON.stringify(text)}`,
      path: `/v1/pets?cursor=${encodeURIComponent(text)}`,
      expect: listError(CURSOR_INVALID),
    },
    {
      when: `petId is ${JSON.stringify(text)}`,
      path: `/v1/pets/${encodeURIComponent(text)}`,
      expect: [400, 'invalid_request', 'petId must be an integer'],
    },
  ]),
  { when: 'limit is a raw %', path: '/v1/pets?limit=%', expect: listError('limit must be an integer') },
  { when: 'status is a raw %', path: '/v1/pets?status=%', expect: listError(STATUS_RULE) },
  {
    when: 'petId is 1 followed by an unencoded SQL comment',
    path: "/v1/pets/1'--",
    expect: [400, 'invalid_request', 'petId must be an integer'],
  },
  // Numbers
  { when: 'limit is -0', path: '/v1/pets?limit=-0', expect: listError('limit must be at least 1') },
  { when: 'limit is 1e400', path: '/v1/pets?limit=1e400', expect: listError('limit must be an integer') },
  {
    when: 'limit is 9223372036854775808',
    path: '/v1/pets?limit=9223372036854775808',
    expect: listError('limit must be at most 100'),
  },
  { when: 'petId is -0', path: '/v1/pets/-0', expect: [400, 'invalid_request', 'petId must be at least 1'] },
  {
    when: 'petId is 1e400',
    path: '/v1/pets/1e400',
    expect: [400, 'invalid_request', 'petId must be an integer'],
  },
  {
    when: 'petId is 9223372036854775808',
    path: '/v1/pets/9223372036854775808',
    expect: [400, 'invalid_request', 'petId must be at most 9223372036854775807'],
  },
  {
    when: 'petId is 9223372036854775807 (no such pet)',
    path: '/v1/pets/9223372036854775807',
    expect: [404, 'not_found', 'no animal has this id'],
  },
  {
    when: 'petId is 1 followed by an encoded NUL',
    path: '/v1/pets/1%00',
    expect: [400, 'invalid_request', 'petId must be an integer'],
  },
  {
    when: 'petId is in Arabic-Indic digits',
    path: `/v1/pets/${encodeURIComponent('١٢٣')}`,
    expect: [400, 'invalid_request', 'petId must be an integer'],
  },
  {
    when: 'petId is hexadecimal',
    path: '/v1/pets/0x10',
    expect: [400, 'invalid_request', 'petId must be an integer'],
  },
  // Headers
  ...SQL_STRINGS.slice(0, 8).map(
    (text): PathCase => ({
      when: `the bearer token is ${JSON.stringify(text)}`,
      path: '/v1/pets',
      headers: { authorization: `Bearer ${text}` },
      expect: [401, 'unauthorized', BAD_KEY],
    }),
  ),
  {
    when: 'the valid key is followed by SQL in the token',
    path: '/v1/pets',
    headers: { authorization: `Bearer ${TEST_KEY}' OR '1'='1` },
    expect: [401, 'unauthorized', BAD_KEY],
  },
  {
    when: 'the Authorization value lists the valid key and another',
    path: '/v1/pets',
    headers: { authorization: `Bearer ${TEST_KEY}, Bearer other-key-0123456789` },
    expect: [401, 'unauthorized', BAD_KEY],
  },
  {
    when: 'the bearer token is 10000 characters long',
    path: '/v1/pets',
    headers: { authorization: `Bearer ${'a'.repeat(10_000)}` },
    expect: [401, 'unauthorized', BAD_KEY],
  },
];

interface RawCase {
  when: string;
  request: string | Buffer;
  /** The Error status, code and message. */
  expect: [status: number, code: string, message: string];
}

const auth = `Authorization: Bearer ${TEST_KEY}\r\n`;
const petBody = '{"name":"Raw","categoryId":1}';
const rawPost = (fields: string, body = petBody) =>
  `POST /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}${fields}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;

/** Requests no fetch client can send: raw bytes on the socket. */
const RAW_CASES: RawCase[] = [
  {
    when: 'two Authorization headers are sent, the valid key first',
    request: `GET /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Authorization: Bearer other-key-0123456789\r\nConnection: close\r\n\r\n`,
    expect: [401, 'unauthorized', 'the API key is not valid'],
  },
  {
    when: 'two Authorization headers are sent, the valid key second',
    request: `GET /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer other-key-0123456789\r\n${auth}Connection: close\r\n\r\n`,
    expect: [401, 'unauthorized', 'the API key is not valid'],
  },
  {
    when: 'two Content-Type headers are sent, application/json first',
    request: rawPost('Content-Type: application/json\r\nContent-Type: text/plain\r\n'),
    expect: [415, 'unsupported_media_type', 'send exactly one Content-Type header'],
  },
  {
    when: 'two Content-Type headers are sent, text/plain first',
    request: rawPost('Content-Type: text/plain\r\nContent-Type: application/json\r\n'),
    expect: [415, 'unsupported_media_type', 'send exactly one Content-Type header'],
  },
  {
    when: 'the bearer token is raw UTF-8 (non-ASCII bytes)',
    request: Buffer.from(
      `GET /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_KEY}é\r\nConnection: close\r\n\r\n`,
      'utf8',
    ),
    expect: [401, 'unauthorized', 'the API key is not valid'],
  },
  {
    when: 'the Authorization header holds a NUL byte',
    request: `GET /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_KEY}\x00\r\nConnection: close\r\n\r\n`,
    expect: [400, 'invalid_request', 'the request is not valid HTTP'],
  },
  {
    when: 'the request target holds a raw NUL byte',
    request: `GET /v1/pets?limit=1\x00 HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Connection: close\r\n\r\n`,
    expect: [400, 'invalid_request', 'the request is not valid HTTP'],
  },
  {
    when: 'the request target holds raw non-ASCII bytes',
    request: Buffer.from(
      `GET /v1/pets?status=söld HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Connection: close\r\n\r\n`,
      'utf8',
    ),
    expect: [400, 'invalid_request', 'the request is not valid HTTP'],
  },
  {
    when: 'two different Content-Length headers are sent',
    request: `POST /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Type: application/json\r\nContent-Length: ${petBody.length}\r\nContent-Length: ${petBody.length + 1}\r\nConnection: close\r\n\r\n${petBody}`,
    expect: [400, 'invalid_request', 'the request is not valid HTTP'],
  },
  {
    when: 'Content-Length and Transfer-Encoding: chunked are both sent (request smuggling)',
    request: `POST /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Type: application/json\r\nContent-Length: ${petBody.length}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${petBody}`,
    expect: [400, 'invalid_request', 'the request is not valid HTTP'],
  },
  {
    when: 'an HTTP/1.1 request has no Host header',
    request: `GET /v1/pets HTTP/1.1\r\n${auth}Connection: close\r\n\r\n`,
    expect: [400, 'invalid_request', 'a Host header is required'],
  },
  {
    when: 'the request line is garbage',
    request: 'GARBAGE\r\n\r\n',
    expect: [400, 'invalid_request', 'the request is not valid HTTP'],
  },
  {
    when: 'the query string is 20 KB long (beyond the 16 KiB head limit)',
    request: `GET /v1/pets?${'x'.repeat(20_000)} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Connection: close\r\n\r\n`,
    expect: [
      431,
      'request_header_fields_too_large',
      'the request head (line and headers) is larger than 16 KiB',
    ],
  },
  {
    when: 'a header is 17 KB long (beyond the 16 KiB head limit)',
    request: `GET /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}X-Padding: ${'p'.repeat(17_000)}\r\nConnection: close\r\n\r\n`,
    expect: [
      431,
      'request_header_fields_too_large',
      'the request head (line and headers) is larger than 16 KiB',
    ],
  },
  {
    when: 'two Host headers are sent (RFC 9112 §3.2)',
    request: `GET /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n${auth}Connection: close\r\n\r\n`,
    expect: [400, 'invalid_request', 'send exactly one Host header'],
  },
  {
    when: 'Expect asks for something other than 100-continue (Expect: 200-ok)',
    request: rawPost('Content-Type: application/json\r\nExpect: 200-ok\r\n'),
    expect: [417, 'expectation_failed', 'the only expectation this service meets is Expect: 100-continue'],
  },
  {
    when: 'Expect: 100-continue comes without a key (the answer is 401, with no 100 Continue before it)',
    request: `POST /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${petBody.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
    expect: [401, 'unauthorized', 'an API key is required: send "Authorization: Bearer <key>"'],
  },
  {
    when: 'the method is CONNECT (this is not a proxy)',
    request: `CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n${auth}Connection: close\r\n\r\n`,
    expect: [400, 'invalid_request', 'CONNECT is not supported: this service is not a proxy'],
  },
  {
    when: 'the method is CONNECT with a path',
    request: `CONNECT /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Connection: close\r\n\r\n`,
    expect: [400, 'invalid_request', 'CONNECT is not supported: this service is not a proxy'],
  },
];

for (const backend of backends) {
  /**
   * Every case on the HTTP layer's backend; elsewhere (PostgreSQL) the ones that reach the database: the
   * accepted bodies, whose names (SQL, control characters, any Unicode) are stored, and the check that
   * the tables are intact and hold exactly those names.
   */
  const everyCase = httpLayerBackends.includes(backend);
  backend.describe(`hostile input (${backend.name}${everyCase ? '' : ': what is stored'})`, () => {
    let server: TestServer;
    /** Every pet the store must hold, in id order: the seed and each accepted request's pet. */
    let expected: Pet[] = [];

    before(async () => {
      server = await startTestServer({ backend, now: () => new Date('2027-01-01T00:00:00Z') });
      const seed = await server.request('POST', '/v1/pets', {
        body: { name: 'Seed', categoryId: 1, status: 'pending' },
      });
      assert.equal(seed.status, 201);
      expected = [seed.exact<Pet>()];
    });
    after(() => server.close());

    /** Every pet, walking every page. */
    async function listAll(): Promise<Pet[]> {
      const pages = await walkLinks('/v1/pets?limit=100', (path) => server.request('GET', path));
      return pages.flatMap((page) => page.exact<Pet[]>());
    }

    /** The store holds exactly `expected`: nothing half-stored, nothing extra, nothing lost. */
    async function assertStoreUnchanged(): Promise<void> {
      const actual = await listAll();
      const same = isDeepStrictEqual(actual, expected);
      // Later cases compare against what is really there, so one failure does not fail them all.
      const before = expected;
      expected = actual;
      assert.ok(
        same,
        `the store changed:\nexpected ${JSON.stringify(before, big)}\nactual ${JSON.stringify(actual, big)}`,
      );
    }

    /**
     * Runs the response checks, then always compares the store (which also resyncs `expected`), so a
     * request that wrongly stored something fails its own test and not the ones after it.
     */
    async function thenStoreUnchanged(checkResponse: () => void | Promise<void>): Promise<void> {
      let failure: unknown;
      try {
        await checkResponse();
      } catch (error) {
        failure = error;
      }
      await assertStoreUnchanged();
      if (failure !== undefined) throw failure;
    }

    async function assertAccepted(res: TestResponse, pet: Omit<Pet, 'id'>): Promise<void> {
      assert.equal(res.status, 201, res.text);
      const body = res.exact<Pet>();
      assert.deepEqual(body, { id: body.id, ...pet });
      const read = await server.request('GET', `/v1/pets/${body.id}`);
      assert.equal(read.status, 200);
      assert.deepEqual(read.exact<Pet>(), body);
      expected.push(body);
    }

    for (const { when, body, contentType, contentEncoding, expect } of [...BODY_CASES, ...CODING_CASES]) {
      if (!everyCase && 'error' in expect) continue;
      const outcome =
        'error' in expect ? `${expect.error[0]} ${expect.error[1]}` : '201 stores it exactly as sent';
      test(`when POST /v1/pets has ${when}, then ${outcome} and the store holds nothing else`, async () => {
        const res = await rawRequest(server, 'POST', '/v1/pets', {
          body,
          headers: {
            'content-type': contentType ?? 'application/json',
            ...(contentEncoding === undefined ? {} : { 'content-encoding': contentEncoding }),
          },
        });
        await thenStoreUnchanged(async () => {
          if ('error' in expect) assertError(res, ...expect.error);
          else await assertAccepted(res, expect.created);
          // RFC 9110 §12.5.3: a 415 for a coding says which codings would do.
          if ('error' in expect && contentEncoding !== undefined && expect.error[0] === 415)
            assert.equal(res.headers.get('accept-encoding'), 'gzip, deflate, br');
          // A body inflating past the limit is not read (nor inflated) any further.
          if ('error' in expect && contentEncoding !== undefined && expect.error[0] === 413)
            assert.equal(res.headers.get('connection'), 'close');
        });
        assert.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype was polluted');
      });
    }

    for (const { when, path, headers, expect } of everyCase ? PATH_CASES : []) {
      const outcome = expect === 'list' ? '200 with the unfiltered list' : `${expect[0]} ${expect[1]}`;
      test(`when ${when}, then ${outcome} and nothing is stored`, async () => {
        const res = await rawRequest(server, 'GET', path, headers ? { headers, key: null } : {});
        await thenStoreUnchanged(() => {
          if (expect === 'list') {
            assert.equal(res.status, 200, res.text);
            assert.deepEqual(res.exact(), expected.slice(0, 20));
          } else {
            assertError(res, ...expect);
          }
        });
      });
    }

    // The request's head, raw requests and Expect: the HTTP layer alone.
    if (everyCase) {
      test('when X-Request-Id holds SQL, then it is not echoed: the response carries a fresh UUID', async () => {
        const res = await rawRequest(server, 'GET', '/v1/pets?limit=1', {
          headers: { 'x-request-id': "' OR 1=1 --" },
        });
        assert.equal(res.status, 200);
        assert.match(res.headers.get('x-request-id') ?? '', UUID);
        await assertStoreUnchanged();
      });

      test('when X-Request-Id is 1000 characters long, then it is not echoed: the response carries a fresh UUID', async () => {
        const res = await rawRequest(server, 'GET', '/v1/pets?limit=1', {
          headers: { 'x-request-id': 'a'.repeat(1000) },
        });
        assert.equal(res.status, 200);
        assert.match(res.headers.get('x-request-id') ?? '', UUID);
      });

      test('when an HTTP/1.0 request has no Host header (HTTP/1.0 does not require one), then it is served', async () => {
        const res = await sendRaw(server.url, `GET /readyz HTTP/1.0\r\n\r\n`);
        assert.equal(res.status, 200);
        assert.deepEqual(JSON.parse(res.body), { status: 'ready' });
      });

      for (const { when, request, expect } of RAW_CASES) {
        const [status, code, message] = expect;
        test(`when ${when}, then ${status} ${code} with the Error body and nothing is stored`, async () => {
          await thenStoreUnchanged(async () =>
            assertRawError(await sendRaw(server.url, request), status, code, message),
          );
        });
      }

      /** Sends a head with Expect: 100-continue, and the body once an interim answer came: both answers. */
      async function sendWithContinue(
        method: string,
        path: string,
        body: string,
      ): Promise<{ interim: string; res: RawHttpResponse }> {
        const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
        const received: Buffer[] = [];
        const closed = new Promise((resolve) => socket.on('close', resolve));
        let continued: () => void = () => undefined;
        const interimCame = new Promise<void>((resolve) => {
          continued = resolve;
        });
        socket.on('data', (data: Buffer) => {
          received.push(data);
          if (Buffer.concat(received).includes('\r\n\r\n')) continued();
        });
        socket.write(
          `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
        );
        await interimCame;
        const interim = Buffer.concat(received).toString('latin1');
        received.length = 0;
        socket.write(body);
        await closed;
        return { interim, res: parseRawResponse(Buffer.concat(received)) };
      }

      test('when Expect: 100-continue comes with a valid key, then 100 Continue is sent, and after the body 201', async () => {
        const { interim, res } = await sendWithContinue(
          'POST',
          '/v1/pets',
          '{"name":"Continued","categoryId":1}',
        );
        assert.equal(interim, 'HTTP/1.1 100 Continue\r\n\r\n');
        assert.equal(res.status, 201, res.body);
        const pet = parseExact<Pet>(res.body);
        assert.deepEqual(pet, { id: pet.id, name: 'Continued', categoryId: 1, status: 'available' });
        expected.push(pet);
        await assertStoreUnchanged();
      });

      // Fastify reads the body of a request it answers 404 or 405 too: without 100 Continue the client would
      // wait for it, and the server for the body.
      for (const [method, path, status, code] of [
        ['POST', '/v1/no/such/path', 404, 'not_found'],
        ['PUT', '/v1/pets', 405, 'method_not_allowed'],
      ] as const) {
        test(`when Expect: 100-continue comes with a key for ${method} ${path}, then 100 Continue is sent, and after the body ${status}`, async () => {
          const { interim, res } = await sendWithContinue(method, path, petBody);
          assert.equal(interim, 'HTTP/1.1 100 Continue\r\n\r\n');
          assert.equal(res.status, status, res.body);
          assert.equal(parseExact<{ code: string }>(res.body).code, code);
          await assertStoreUnchanged();
        });
      }
    }

    test('when every hostile input has been sent, then the tables are all there, intact, and hold exactly the accepted pets', async () => {
      const tables = await tableNames(server.database.url);
      for (const table of ['api_keys', 'pets'])
        assert.ok(tables.includes(table), `table ${table} is gone: ${tables}`);
      assert.equal(await integrityCheck(server.database.url), 'ok');
      const rows = await storedPets(server.database.url);
      assert.deepEqual(
        rows,
        expected.map((pet) => ({
          id: String(pet.id),
          name: pet.name,
          categoryId: String(pet.categoryId),
          status: pet.status,
        })),
      );
      assert.equal(await server.storage.pets.count(), expected.length);
      // Every SQL text that was sent as a name is there once, exactly as sent.
      for (const name of SQL_STRINGS) assert.equal(rows.filter((row) => row.name === name).length, 1, name);
      const ok = await server.request('POST', '/v1/pets', { body: { name: 'After', categoryId: 2 } });
      assert.equal(ok.status, 201);
      assert.deepEqual(parseExact<Pet>(ok.text).name, 'After');
    });
  });
}

/** JSON.stringify replacer for bigints. */
function big(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? `${value}n` : value;
}
