import assert from 'node:assert/strict';
import { after, backends, before, test } from '../support/backends.js';
import { assertError } from '../support/error-body.js';
import { exactInt, parseExact, rawRequest } from '../support/raw-json.js';
import { startTestServer, type TestResponse, type TestServer } from '../support/test-server.js';

interface PetBody {
  id: number | bigint;
  name: string;
  categoryId: number | bigint;
  status: string;
}

const JSON_UTF8 = 'application/json; charset=utf-8';
/** getPet is used to read pets back; its clock stays before the sunset whatever the real date. */
const BEFORE_SUNSET = () => new Date('2027-01-01T00:00:00Z');
const DEFAULT_BODY_LIMIT = 64 * 1024;
const NAME_RULE = 'name must not be blank nor contain control characters or unpaired surrogates';
const NAME_TOO_LONG = 'name must be at most 255 characters long';
const STATUS_RULE = 'status must be one of available, pending, sold';
const NOT_INTEGER = 'categoryId must be an integer';
const NOT_JSON = 'request body is not valid JSON: ';
const NOT_UTF8 = 'request body is not valid UTF-8';
const NOT_OBJECT = 'request body must be an object';
const NOT_JSON_MEDIA = 'request body must be application/json';

/** A JSON text padded with trailing white space (valid JSON) to exactly `bytes` bytes. */
const padTo = (json: string, bytes: number): string => json + ' '.repeat(bytes - Buffer.byteLength(json));

/** A body streamed in chunks, so it travels without Content-Length (chunked transfer coding). */
function streamOf(text: string, chunkSize = 1024): ReadableStream<Uint8Array> {
  const bytes = Buffer.from(text);
  let offset = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.length) {
        controller.close();
        return;
      }
      controller.enqueue(new Uint8Array(bytes.subarray(offset, offset + chunkSize)));
      offset += chunkSize;
    },
  });
}

/**
 * Asserts a 201: JSON content type, a body that is exactly `expected` plus an id, and a Location
 * that is `locationBase` + `/pets/{id}`. Then reads the pet back through that Location and asserts
 * the stored pet is byte for byte the one acknowledged. Returns the pet.
 */
async function assertCreated(
  server: TestServer,
  res: TestResponse,
  expected: Omit<PetBody, 'id'>,
  locationBase = '/v1',
): Promise<PetBody> {
  assert.equal(res.status, 201, res.text);
  assert.equal(res.headers.get('content-type'), JSON_UTF8);
  const pet = res.exact<PetBody>();
  assert.ok(typeof pet.id === 'number' && Number.isSafeInteger(pet.id) && pet.id >= 1, `id ${pet.id}`);
  assert.deepEqual(pet, { id: pet.id, ...expected });
  assert.equal(res.headers.get('location'), `${locationBase}/pets/${pet.id}`);
  const stored = await server.request('GET', `/v1/pets/${pet.id}`);
  assert.equal(stored.status, 200);
  assert.equal(stored.text, res.text);
  return pet;
}

for (const backend of backends) {
  backend.describe(`createPet: accepted bodies (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ backend, now: BEFORE_SUNSET });
    });
    after(() => server.close());

    test('when name, categoryId and status are sent, then 201 returns the stored pet and Location /v1/pets/{id}', async () => {
      const res = await server.request('POST', '/v1/pets', {
        body: { name: 'Rex', categoryId: 7, status: 'pending' },
      });
      const pet = await assertCreated(server, res, { name: 'Rex', categoryId: 7, status: 'pending' });
      const list = await server.request('GET', '/v1/pets?limit=100');
      assert.equal(list.status, 200);
      assert.deepEqual(list.exact(), [pet]);
    });

    test('when status is omitted, then the pet is stored as available', async () => {
      const res = await server.request('POST', '/v1/pets', { body: { name: 'Bella', categoryId: 3 } });
      await assertCreated(server, res, { name: 'Bella', categoryId: 3, status: 'available' });
    });

    for (const status of ['available', 'pending', 'sold']) {
      test(`when status is "${status}", then 201 stores the pet as ${status}`, async () => {
        const res = await server.request('POST', '/v1/pets', {
          body: { name: 'Kit', categoryId: 2, status },
        });
        await assertCreated(server, res, { name: 'Kit', categoryId: 2, status });
      });
    }

    test('when two pets are created, then each gets its own id and its own Location', async () => {
      const first = await server.request('POST', '/v1/pets', { body: { name: 'One', categoryId: 1 } });
      const second = await server.request('POST', '/v1/pets', { body: { name: 'Two', categoryId: 1 } });
      const a = await assertCreated(server, first, { name: 'One', categoryId: 1, status: 'available' });
      const b = await assertCreated(server, second, { name: 'Two', categoryId: 1, status: 'available' });
      assert.notEqual(a.id, b.id);
      assert.notEqual(first.headers.get('location'), second.headers.get('location'));
    });

    const names: { when: string; name: string }[] = [
      { when: 'a single character', name: 'x' },
      { when: 'surrounded by spaces', name: '  Rex  ' },
      { when: 'leading and trailing no-break and ideographic spaces', name: '\u00a0Rex\u3000' },
      { when: 'accented, precomposed (NFC)', name: 'Émile Zoë' },
      { when: 'accented, decomposed (NFD), which must not be normalised', name: 'E\u0301mile Zoe\u0308' },
      { when: 'CJK', name: '東京の猫' },
      { when: 'right-to-left script', name: 'قطة صغيرة' },
      { when: 'an emoji (astral, a surrogate pair)', name: '🐶 Dog' },
      { when: 'an emoji ZWJ sequence with a skin tone', name: '👩🏽‍🚀 and 👨‍👩‍👧' },
      { when: 'quotes, backslashes, slashes and markup', name: '"Rex" \\o/ <b>&amp;</b>' },
      { when: 'a zero-width space between letters', name: 'Re\u200bx' },
      { when: '255 ASCII characters', name: 'a'.repeat(255) },
      { when: '255 astral emoji (255 code points, 510 UTF-16 units)', name: '🐶'.repeat(255) },
      { when: '254 ASCII characters and one astral emoji', name: `${'a'.repeat(254)}🐈` },
    ];
    for (const { when, name } of names) {
      test(`when name is ${when}, then 201 stores it exactly as sent`, async () => {
        const res = await server.request('POST', '/v1/pets', { body: { name, categoryId: 1 } });
        const pet = await assertCreated(server, res, { name, categoryId: 1, status: 'available' });
        assert.equal(pet.name, name);
      });
    }

    test('when name uses JSON \\u escapes, including an escaped surrogate pair, then 201 stores the decoded text', async () => {
      const res = await server.request('POST', '/v1/pets', {
        body: '{"name":"\\u0052\\u00e9x \\ud83d\\udc36 \\"\\/\\\\","categoryId":1}',
      });
      await assertCreated(server, res, { name: 'Réx 🐶 "/\\', categoryId: 1, status: 'available' });
    });

    const categoryIds = [
      '0',
      '1',
      '-1',
      '9007199254740991',
      '9007199254740992',
      '9007199254740993',
      '-9007199254740993',
      '9223372036854775806',
      '9223372036854775807',
      '-9223372036854775808',
    ];
    for (const literal of categoryIds) {
      test(`when categoryId is ${literal}, then 201 returns and stores it exactly`, async () => {
        const res = await server.request('POST', '/v1/pets', {
          body: `{"name":"Int64","categoryId":${literal}}`,
        });
        assert.ok(res.text.includes(`"categoryId":${literal},`), res.text);
        await assertCreated(server, res, {
          name: 'Int64',
          categoryId: exactInt(literal),
          status: 'available',
        });
      });
    }

    test('when properties come in another order with white space between tokens, then 201', async () => {
      const res = await server.request('POST', '/v1/pets', {
        body: '\r\n\t{ "status" : "sold" ,\n  "categoryId" : 42 , "name" : "Order" }\n',
      });
      await assertCreated(server, res, { name: 'Order', categoryId: 42, status: 'sold' });
    });

    const mediaTypes = [
      'application/json',
      'application/json; charset=utf-8',
      'application/json;charset=UTF-8',
    ];
    for (const contentType of mediaTypes) {
      test(`when Content-Type is "${contentType}", then 201`, async () => {
        const res = await rawRequest(server, 'POST', '/v1/pets', {
          body: '{"name":"Typed","categoryId":5}',
          headers: { 'content-type': contentType },
        });
        await assertCreated(server, res, { name: 'Typed', categoryId: 5, status: 'available' });
      });
    }

    test('when the body is exactly the 64 KiB default limit (padded with white space), then 201', async () => {
      const body = padTo('{"name":"Big","categoryId":64}', DEFAULT_BODY_LIMIT);
      assert.equal(Buffer.byteLength(body), DEFAULT_BODY_LIMIT);
      const res = await server.request('POST', '/v1/pets', { body });
      await assertCreated(server, res, { name: 'Big', categoryId: 64, status: 'available' });
    });

    test('when the body is sent chunked (no Content-Length) and within the limit, then 201', async () => {
      const res = await rawRequest(server, 'POST', '/v1/pets', {
        body: streamOf(padTo('{"name":"Chunked","categoryId":8}', 10_000)),
        headers: { 'content-type': 'application/json' },
      });
      await assertCreated(server, res, { name: 'Chunked', categoryId: 8, status: 'available' });
    });
  });

  backend.describe(`createPet: refused requests store nothing (${backend.name})`, () => {
    let server: TestServer;
    /** The list as it stood before any refused request: one seeded pet. */
    let seededList: string;

    before(async () => {
      server = await startTestServer({ backend, now: BEFORE_SUNSET });
      const seed = await server.request('POST', '/v1/pets', { body: { name: 'Seed', categoryId: 1 } });
      assert.equal(seed.status, 201);
      const list = await server.request('GET', '/v1/pets?limit=100');
      assert.deepEqual(list.json(), [
        { id: seed.json<PetBody>().id, name: 'Seed', categoryId: 1, status: 'available' },
      ]);
      seededList = list.text;
    });
    after(() => server.close());

    async function assertNothingStored(): Promise<void> {
      const list = await server.request('GET', '/v1/pets?limit=100');
      assert.deepEqual(
        { status: list.status, link: list.headers.get('link'), body: list.text },
        { status: 200, link: null, body: seededList },
      );
    }

    /** POSTs a raw JSON text (or bytes) as application/json and expects 400 with exactly `message`. */
    async function assertRefused(body: string | Buffer, message: string): Promise<void> {
      const res = await server.request('POST', '/v1/pets', { body });
      assertError(res, 400, 'invalid_request', message);
      await assertNothingStored();
    }

    const nameCases: { when: string; body: string; message: string }[] = [
      {
        when: 'name is empty',
        body: '{"name":"","categoryId":1}',
        message: 'name must be at least 1 character long',
      },
      { when: 'name is only spaces', body: '{"name":"   ","categoryId":1}', message: NAME_RULE },
      {
        when: 'name is only a no-break space',
        body: '{"name":"\\u00a0","categoryId":1}',
        message: NAME_RULE,
      },
      {
        when: 'name is only an ideographic space',
        body: '{"name":"\\u3000","categoryId":1}',
        message: NAME_RULE,
      },
      {
        when: 'name is only white space and a tab',
        body: '{"name":" \\t ","categoryId":1}',
        message: NAME_RULE,
      },
      { when: 'name is a NUL (\\u0000)', body: '{"name":"\\u0000","categoryId":1}', message: NAME_RULE },
      {
        when: 'name contains a NUL (\\u0000)',
        body: '{"name":"Re\\u0000x","categoryId":1}',
        message: NAME_RULE,
      },
      { when: 'name contains U+001F', body: '{"name":"Rex\\u001f","categoryId":1}', message: NAME_RULE },
      {
        when: 'name contains DEL (U+007F)',
        body: '{"name":"Rex\\u007f","categoryId":1}',
        message: NAME_RULE,
      },
      { when: 'name contains a tab', body: '{"name":"Re\\tx","categoryId":1}', message: NAME_RULE },
      {
        when: 'name contains an escaped line feed',
        body: '{"name":"Re\\nx","categoryId":1}',
        message: NAME_RULE,
      },
      {
        when: 'name contains a carriage return',
        body: '{"name":"Rex\\r","categoryId":1}',
        message: NAME_RULE,
      },
      {
        when: 'name is a lone high surrogate escape \\ud800',
        body: '{"name":"\\ud800","categoryId":1}',
        message: NAME_RULE,
      },
      {
        when: 'name ends in a lone high surrogate escape',
        body: '{"name":"Rex\\ud83d","categoryId":1}',
        message: NAME_RULE,
      },
      {
        when: 'name contains a lone low surrogate escape \\udc00',
        body: '{"name":"a\\udc00b","categoryId":1}',
        message: NAME_RULE,
      },
      {
        when: 'name is a reversed surrogate pair',
        body: '{"name":"\\udc36\\ud83d","categoryId":1}',
        message: NAME_RULE,
      },
      {
        when: 'name has 256 ASCII characters',
        body: JSON.stringify({ name: 'a'.repeat(256), categoryId: 1 }),
        message: NAME_TOO_LONG,
      },
      {
        when: 'name has 256 astral emoji',
        body: JSON.stringify({ name: '🐶'.repeat(256), categoryId: 1 }),
        message: NAME_TOO_LONG,
      },
      {
        when: 'name has 255 ASCII characters and one emoji',
        body: JSON.stringify({ name: `${'a'.repeat(255)}🐶`, categoryId: 1 }),
        message: NAME_TOO_LONG,
      },
      { when: 'name is true', body: '{"name":true,"categoryId":1}', message: 'name must be a string' },
      { when: 'name is 1', body: '{"name":1,"categoryId":1}', message: 'name must be a string' },
      { when: 'name is null', body: '{"name":null,"categoryId":1}', message: 'name must be a string' },
      { when: 'name is an array', body: '{"name":["Rex"],"categoryId":1}', message: 'name must be a string' },
      {
        when: 'name is an object',
        body: '{"name":{"first":"Rex"},"categoryId":1}',
        message: 'name must be a string',
      },
    ];
    for (const { when, body, message } of nameCases) {
      test(`when ${when}, then 400 naming name and nothing is stored`, () => assertRefused(body, message));
    }

    const categoryIdCases: { literal: string; message: string }[] = [
      { literal: '"1"', message: NOT_INTEGER },
      { literal: 'true', message: NOT_INTEGER },
      { literal: 'null', message: NOT_INTEGER },
      { literal: '[1]', message: NOT_INTEGER },
      { literal: '{"id":1}', message: NOT_INTEGER },
      { literal: '1.5', message: NOT_INTEGER },
      { literal: '1.0', message: NOT_INTEGER },
      { literal: '-0.0', message: NOT_INTEGER },
      { literal: '1e2', message: NOT_INTEGER },
      { literal: '1E2', message: NOT_INTEGER },
      { literal: '10e-1', message: NOT_INTEGER },
      { literal: '1e-400', message: NOT_INTEGER },
      { literal: '1e400', message: NOT_INTEGER },
      { literal: '9007199254740993.5', message: NOT_INTEGER },
      { literal: '9223372036854775807.0', message: NOT_INTEGER },
      { literal: '9223372036854775808', message: 'categoryId must be at most 9223372036854775807' },
      { literal: '18446744073709551616', message: 'categoryId must be at most 9223372036854775807' },
      { literal: '-9223372036854775809', message: 'categoryId must be at least -9223372036854775808' },
    ];
    for (const { literal, message } of categoryIdCases) {
      test(`when categoryId is ${literal}, then 400 "${message}" and nothing is stored`, () =>
        assertRefused(`{"name":"Rex","categoryId":${literal}}`, message));
    }

    const statusCases: { literal: string; message: string }[] = [
      { literal: '"lost"', message: STATUS_RULE },
      { literal: '"Available"', message: STATUS_RULE },
      { literal: '"SOLD"', message: STATUS_RULE },
      { literal: '" sold"', message: STATUS_RULE },
      { literal: '""', message: STATUS_RULE },
      { literal: '1', message: `status must be a string; ${STATUS_RULE}` },
      { literal: 'null', message: `status must be a string; ${STATUS_RULE}` },
      { literal: '["sold"]', message: `status must be a string; ${STATUS_RULE}` },
    ];
    for (const { literal, message } of statusCases) {
      test(`when status is ${literal}, then 400 naming status and nothing is stored`, () =>
        assertRefused(`{"name":"Rex","categoryId":1,"status":${literal}}`, message));
    }

    const propertyCases: { when: string; body: string; message: string }[] = [
      {
        when: 'an id is sent',
        body: '{"id":5,"name":"Rex","categoryId":1}',
        message: 'id is not a known property',
      },
      {
        when: 'an unknown property is sent',
        body: '{"name":"Rex","categoryId":1,"colour":"brown"}',
        message: 'colour is not a known property',
      },
      {
        when: 'a property differs only in case',
        body: '{"name":"Rex","categoryId":1,"Status":"sold"}',
        message: 'Status is not a known property',
      },
      {
        when: 'name is misspelt',
        body: '{"nmae":"Rex","categoryId":1}',
        message: 'name is required; nmae is not a known property',
      },
      {
        when: '__proto__ is sent',
        body: '{"name":"Rex","categoryId":1,"__proto__":{"status":"sold"}}',
        message: '__proto__ is not a known property',
      },
      {
        when: 'constructor is sent',
        body: '{"name":"Rex","categoryId":1,"constructor":{"prototype":{"status":"sold"}}}',
        message: 'constructor is not a known property',
      },
      { when: 'name is missing', body: '{"categoryId":1}', message: 'name is required' },
      { when: 'categoryId is missing', body: '{"name":"Rex"}', message: 'categoryId is required' },
      {
        when: 'the body is an empty object',
        body: '{}',
        message: 'name is required; categoryId is required',
      },
      {
        when: 'only status is sent',
        body: '{"status":"sold"}',
        message: 'name is required; categoryId is required',
      },
    ];
    for (const { when, body, message } of propertyCases) {
      test(`when ${when}, then 400 "${message}" and nothing is stored`, () => assertRefused(body, message));
    }

    const severalCases: { when: string; body: string; message: string }[] = [
      {
        when: 'categoryId is a string and status unknown',
        body: '{"name":"Rex","categoryId":"1","status":"lost"}',
        message: `${NOT_INTEGER}; ${STATUS_RULE}`,
      },
      {
        when: 'every field is null',
        body: '{"name":null,"categoryId":null,"status":null}',
        message: `name must be a string; ${NOT_INTEGER}; status must be a string; ${STATUS_RULE}`,
      },
      {
        when: 'name, categoryId and status are all invalid and two unknown properties are sent',
        body: '{"name":"","categoryId":1.5,"status":"lost","id":3,"extra":true}',
        message:
          'id is not a known property; extra is not a known property; name must be at least 1 character long; ' +
          `${NOT_INTEGER}; ${STATUS_RULE}`,
      },
      {
        when: 'name is blank and categoryId is out of range',
        body: '{"name":" ","categoryId":9223372036854775808}',
        message: `${NAME_RULE}; categoryId must be at most 9223372036854775807`,
      },
      {
        when: '__proto__ and constructor are both sent with valid fields',
        body: '{"__proto__":{"polluted":"yes"},"name":"Rex","constructor":{"prototype":{"polluted":"yes"}},"categoryId":1}',
        message: '__proto__ is not a known property; constructor is not a known property',
      },
    ];
    for (const { when, body, message } of severalCases) {
      test(`when ${when}, then one 400 names every problem and nothing is stored`, () =>
        assertRefused(body, message));
    }

    test('when __proto__ and constructor.prototype carry values, then no object in the service gains them', async () => {
      await assertRefused(
        '{"name":"Rex","categoryId":1,"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}}}',
        '__proto__ is not a known property; constructor is not a known property',
      );
      // The service runs in this process: a polluted prototype would show on every object here.
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
      assert.equal(Object.hasOwn(Object.prototype, 'polluted'), false);
    });

    const shapeCases: { when: string; body: string }[] = [
      { when: 'an empty array', body: '[]' },
      { when: 'an array holding a valid pet', body: '[{"name":"Rex","categoryId":1}]' },
      { when: 'a string', body: '"Rex"' },
      { when: 'a number', body: '1' },
      { when: 'null', body: 'null' },
      { when: 'true', body: 'true' },
    ];
    for (const { when, body } of shapeCases) {
      test(`when the body is ${when}, then 400 "${NOT_OBJECT}" and nothing is stored`, () =>
        assertRefused(body, NOT_OBJECT));
    }

    const invalidJsonCases: { when: string; body: string; reason: string }[] = [
      {
        when: 'only white space',
        body: '   ',
        reason: 'JSON value expected but reached end of input at position 3',
      },
      {
        when: 'an unclosed object',
        body: '{',
        reason: "Quoted object key or end of object '}' expected but reached end of input at position 1",
      },
      {
        when: 'a truncated pet',
        body: '{"name":"Rex","categoryId":1',
        reason: "Quoted object key or end of object '}' expected but reached end of input at position 28",
      },
      {
        when: 'a trailing comma',
        body: '{"name":"Rex","categoryId":1,}',
        reason: "Quoted object key expected but got '}' at position 29",
      },
      {
        when: 'single-quoted',
        body: "{'name':'Rex','categoryId':1}",
        reason: "Quoted object key expected but got ''' at position 1",
      },
      {
        when: 'an unquoted key',
        body: '{name:"Rex","categoryId":1}',
        reason: "Quoted object key expected but got 'n' at position 1",
      },
      {
        when: 'a raw line feed inside a string',
        body: '{"name":"Re\nx","categoryId":1}',
        reason: "Invalid character '\n' at position 11",
      },
      {
        when: 'a pet followed by garbage',
        body: '{"name":"Rex","categoryId":1}x',
        reason: "Expected end of input but got 'x' at position 29",
      },
      {
        when: 'two JSON values',
        body: '{"name":"Rex","categoryId":1}{}',
        reason: "Expected end of input but got '{' at position 29",
      },
      {
        when: 'a number with a leading zero',
        body: '{"name":"Rex","categoryId":01}',
        reason: "Comma ',' expected after value but got '1' at position 28",
      },
      {
        when: 'a number with a plus sign',
        body: '{"name":"Rex","categoryId":+1}',
        reason: "Object value expected after ':' at position 27",
      },
      {
        when: 'a number without an integer part',
        body: '{"name":"Rex","categoryId":.5}',
        reason: "Object value expected after ':' at position 27",
      },
      {
        when: 'NaN',
        body: '{"name":"Rex","categoryId":NaN}',
        reason: "Object value expected after ':' at position 27",
      },
      {
        when: 'a comment',
        body: '{"name":"Rex", /* c */ "categoryId":1}',
        reason: "Quoted object key expected but got '/' at position 15",
      },
      { when: 'nested 60000 arrays deep', body: '['.repeat(60_000), reason: 'it is nested too deeply' },
      { when: 'nested 10000 objects deep', body: '{"a":'.repeat(10_000), reason: 'it is nested too deeply' },
      {
        when: 'a duplicate name with different values',
        body: '{"name":"Rex","name":"Max","categoryId":1}',
        reason: "Duplicate key 'name' encountered at position 15",
      },
      {
        when: 'a duplicate categoryId with different values',
        body: '{"name":"Rex","categoryId":1,"categoryId":2}',
        reason: "Duplicate key 'categoryId' encountered at position 30",
      },
      {
        when: 'a duplicate status with different values',
        body: '{"name":"Rex","categoryId":1,"status":"sold","status":"available"}',
        reason: "Duplicate key 'status' encountered at position 46",
      },
    ];
    for (const { when, body, reason } of invalidJsonCases) {
      test(`when the body is invalid JSON (${when}), then 400 and nothing is stored`, () =>
        assertRefused(body, NOT_JSON + reason));
    }

    const utf8 = (...parts: (string | number[])[]): Buffer =>
      Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part) : Buffer.from(part))));
    const invalidUtf8Cases: { when: string; body: Buffer }[] = [
      { when: 'a lead byte followed by ASCII', body: utf8('{"name":"', [0xc3, 0x28], '","categoryId":1}') },
      { when: 'a lone continuation byte', body: utf8('{"name":"Re', [0x80], 'x","categoryId":1}') },
      { when: 'an overlong encoding of "/"', body: utf8('{"name":"', [0xc0, 0xaf], '","categoryId":1}') },
      {
        when: 'an encoded surrogate (CESU-8)',
        body: utf8('{"name":"', [0xed, 0xa0, 0x80], '","categoryId":1}'),
      },
      { when: 'a truncated three-byte sequence', body: utf8('{"name":"', [0xe2, 0x82], '","categoryId":1}') },
      { when: 'a 0xFF byte', body: utf8('{"name":"', [0xff], '","categoryId":1}') },
      {
        when: 'a code point above U+10FFFF',
        body: utf8('{"name":"', [0xf4, 0x90, 0x80, 0x80], '","categoryId":1}'),
      },
      { when: 'a bad byte in a key', body: utf8('{"na', [0xfe], 'me":"Rex","categoryId":1}') },
    ];
    for (const { when, body } of invalidUtf8Cases) {
      test(`when the body is not valid UTF-8 (${when}), then 400 "${NOT_UTF8}" and nothing is stored`, () =>
        assertRefused(body, NOT_UTF8));
    }

    test('when the body is empty with Content-Type application/json, then 400 "request body is required"', () =>
      assertRefused('', 'request body is required'));

    test('when there is no body and no Content-Type, then 400 and nothing is stored', async () => {
      const res = await rawRequest(server, 'POST', '/v1/pets');
      assertError(res, 400, 'invalid_request', NOT_OBJECT);
      await assertNothingStored();
    });

    const unsupportedTypes = [
      'text/plain',
      'text/plain; charset=utf-8',
      'text/json',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=xyz',
      'application/xml',
      'application/json-patch+json',
      'application/merge-patch+json',
      'application/jsonx',
      'application/octet-stream',
    ];
    for (const contentType of unsupportedTypes) {
      test(`when Content-Type is "${contentType}", then 415 unsupported_media_type and nothing is stored`, async () => {
        const res = await server.request('POST', '/v1/pets', {
          body: '{"name":"Rex","categoryId":1}',
          headers: { 'content-type': contentType },
        });
        assertError(res, 415, 'unsupported_media_type', NOT_JSON_MEDIA);
        await assertNothingStored();
      });
    }

    test('when a JSON body is sent without Content-Type, then 415 unsupported_media_type and nothing is stored', async () => {
      const res = await rawRequest(server, 'POST', '/v1/pets', {
        body: Buffer.from('{"name":"Rex","categoryId":1}'),
      });
      assertError(res, 415, 'unsupported_media_type', NOT_JSON_MEDIA);
      await assertNothingStored();
    });

    const tooLarge: { when: string; body: () => string | ReadableStream<Uint8Array> }[] = [
      {
        when: 'one byte over the 64 KiB default limit',
        body: () => padTo('{"name":"Big","categoryId":1}', DEFAULT_BODY_LIMIT + 1),
      },
      { when: '1 MiB', body: () => padTo('{"name":"Big","categoryId":1}', 1024 * 1024) },
      {
        when: 'over the limit and sent chunked (no Content-Length)',
        body: () => streamOf(padTo('{"name":"Big","categoryId":1}', DEFAULT_BODY_LIMIT + 4096)),
      },
    ];
    for (const { when, body } of tooLarge) {
      test(`when the body is ${when}, then 413 payload_too_large and nothing is stored`, async () => {
        const res = await rawRequest(server, 'POST', '/v1/pets', {
          body: body(),
          headers: { 'content-type': 'application/json' },
        });
        assertError(res, 413, 'payload_too_large', 'request body is too large');
        await assertNothingStored();
      });
    }

    const unauthorized: {
      when: string;
      key: string | null;
      body: string;
      message: string;
      challenge: string;
    }[] = [
      {
        when: 'no API key is sent with a valid body',
        key: null,
        body: '{"name":"Rex","categoryId":1}',
        message: 'an API key is required: send "Authorization: Bearer <key>"',
        challenge: 'Bearer realm="animal-store"',
      },
      {
        when: 'no API key is sent with an invalid body (authentication comes first)',
        key: null,
        body: '{"name":"","categoryId":"x","id":1}',
        message: 'an API key is required: send "Authorization: Bearer <key>"',
        challenge: 'Bearer realm="animal-store"',
      },
      {
        when: 'an unknown API key is sent',
        key: 'pst_not-a-real-key-0123456789',
        body: '{"name":"Rex","categoryId":1}',
        message: 'the API key is not valid',
        challenge: 'Bearer realm="animal-store", error="invalid_token"',
      },
    ];
    for (const { when, key, body, message, challenge } of unauthorized) {
      test(`when ${when}, then 401 unauthorized and nothing is stored`, async () => {
        const res = await server.request('POST', '/v1/pets', { body, key });
        assertError(res, 401, 'unauthorized', message);
        assert.equal(res.headers.get('www-authenticate'), challenge);
        await assertNothingStored();
      });
    }
  });

  backend.describe(`createPet with PUBLIC_BASE_URL set (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({
        backend,
        now: BEFORE_SUNSET,
        env: { PUBLIC_BASE_URL: 'https://api.example.com/v1' },
      });
    });
    after(() => server.close());

    test('when a pet is created, then Location is the absolute https://api.example.com/v1/pets/{id}', async () => {
      const res = await server.request('POST', '/v1/pets', { body: { name: 'Abs', categoryId: 9 } });
      await assertCreated(
        server,
        res,
        { name: 'Abs', categoryId: 9, status: 'available' },
        'https://api.example.com/v1',
      );
    });
  });

  backend.describe(`createPet with BODY_LIMIT=1024 (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ backend, now: BEFORE_SUNSET, env: { BODY_LIMIT: '1024' } });
    });
    after(() => server.close());

    test('when the body is exactly 1024 bytes, then 201', async () => {
      const res = await server.request('POST', '/v1/pets', {
        body: padTo('{"name":"Small","categoryId":1}', 1024),
      });
      await assertCreated(server, res, { name: 'Small', categoryId: 1, status: 'available' });
    });

    const overLimit: { when: string; body: () => string | ReadableStream<Uint8Array> }[] = [
      { when: '1025 bytes', body: () => padTo('{"name":"Small","categoryId":2}', 1025) },
      {
        when: '2000 bytes sent chunked',
        body: () => streamOf(padTo('{"name":"Small","categoryId":2}', 2000), 100),
      },
    ];
    for (const { when, body } of overLimit) {
      test(`when the body is ${when}, then 413 payload_too_large and nothing is stored`, async () => {
        const res = await rawRequest(server, 'POST', '/v1/pets', {
          body: body(),
          headers: { 'content-type': 'application/json' },
        });
        assertError(res, 413, 'payload_too_large', 'request body is too large');
        const list = await server.request('GET', '/v1/pets?limit=100');
        assert.equal(list.status, 200);
        assert.deepEqual(
          parseExact<PetBody[]>(list.text).map((pet) => pet.categoryId),
          [1],
        );
      });
    }
  });
}
