import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { ErrorObject } from 'ajv';
import {
  ConflictError,
  IdempotencyKeyReusedError,
  InvalidCursorError,
  StorageUnavailableError,
  UnknownReferenceError,
} from '../../src/domain/errors.js';
import {
  IDEMPOTENCY_WINDOW_MS,
  idempotencyClaim,
  orderRequestHashOf,
  pruneIdempotencyKeys,
  requestHashOf,
} from '../../src/domain/idempotency.js';
import type { Storage } from '../../src/domain/storage.js';
import { ApiError, RETRY_AFTER_SECONDS, toApiError, unavailable } from '../../src/http/request/errors.js';
import {
  createValidatorCompiler,
  describeValidationErrors,
  PATTERN_MESSAGE,
  withExactIntegers,
} from '../../src/http/request/validation.js';
import { IdempotencyKeyHeaders, idempotencyKeyOf } from '../../src/http/routes/idempotency.js';
import { Links, linkHeader } from '../../src/http/routes/links.js';
import { openStorage } from '../../src/storage/open-storage.js';

// The HTTP helpers that need no server: unit tests, fast enough to run once per mutant.

describe('links', () => {
  test('without PUBLIC_BASE_URL, then every link is path-absolute under /v1, and the docs beside it', () => {
    const links = new Links(undefined);
    assert.equal(links.pet(42n), '/v1/pets/42');
    assert.equal(links.order(7n), '/v1/store/orders/7');
    assert.equal(links.petsPage(2, undefined, 'abc'), '/v1/pets?limit=2&cursor=abc');
    assert.equal(links.petsPage(3, 'sold', 'c_d'), '/v1/pets?limit=3&status=sold&cursor=c_d');
    assert.equal(
      links.ordersPage(5, { status: undefined, petId: undefined }, 'x'),
      '/v1/store/orders?limit=5&cursor=x',
    );
    assert.equal(
      links.ordersPage(5, { status: 'placed', petId: 0n }, 'x'),
      '/v1/store/orders?limit=5&status=placed&petId=0&cursor=x',
    );
    assert.equal(links.listPetsDocs(), '/docs#/pets/listPets');
  });

  test('with PUBLIC_BASE_URL, then every link is absolute, and the docs page sits beside the versioned API', () => {
    const links = new Links('https://api.example.com/animals/v1');
    assert.equal(links.pet(1n), 'https://api.example.com/animals/v1/pets/1');
    assert.equal(
      links.ordersPage(1, { status: undefined, petId: 9n }, 'y'),
      'https://api.example.com/animals/v1/store/orders?limit=1&petId=9&cursor=y',
    );
    assert.equal(links.listPetsDocs(), 'https://api.example.com/animals/docs#/pets/listPets');
  });

  test('a Link header value is RFC 8288, with the type only when given', () => {
    assert.equal(linkHeader('/v1/pets?cursor=a', 'next'), '</v1/pets?cursor=a>; rel="next"');
    assert.equal(
      linkHeader('/docs', 'deprecation', 'text/html'),
      '</docs>; rel="deprecation"; type="text/html"',
    );
  });
});

describe('Idempotency-Key header', () => {
  test('a Structured Field string loses its quotes; a bare key, or anything not a plain quoted string, is kept as sent', () => {
    assert.equal(idempotencyKeyOf('"abc-1"'), 'abc-1');
    assert.equal(idempotencyKeyOf('abc-1'), 'abc-1');
    assert.equal(idempotencyKeyOf('""'), '""', 'an empty string is not a key');
    assert.equal(idempotencyKeyOf('"a"b"'), '"a"b"');
    assert.equal(idempotencyKeyOf('"a\\b"'), '"a\\b"', 'an escape is not unquoted');
    assert.equal(idempotencyKeyOf('x"abc"'), 'x"abc"');
    assert.equal(idempotencyKeyOf('"abc"x'), '"abc"x');
  });

  test('the header is 1 to 255 visible ASCII characters; anything else is refused with the reason in words', () => {
    const validate = createValidatorCompiler([])({
      schema: IdempotencyKeyHeaders,
      httpPart: 'headers',
      method: 'POST',
      url: '/v1/pets',
    }) as ((data: unknown) => boolean) & { errors?: ErrorObject[] };
    const check = (key: string) => {
      const ok = validate({ 'idempotency-key': key, other: 'kept' });
      return ok ? 'ok' : describeValidationErrors(validate.errors ?? [], 'headers');
    };
    assert.equal(validate({}), true, 'the header is optional');
    assert.equal(check('a'), 'ok');
    assert.equal(check('!'.repeat(255)), 'ok');
    assert.equal(check('~'), 'ok');
    const words = 'idempotency-key must be visible ASCII characters only (no spaces, no control characters)';
    assert.equal(check(''), `idempotency-key must be at least 1 character long; ${words}`);
    assert.equal(check('a'.repeat(256)), 'idempotency-key must be at most 255 characters long');
    assert.equal(check('a b'), words);
    assert.equal(check('a\u007f'), words);
    assert.equal(check('é'), words);
  });

  test('the header is documented in openapi.json (the document the service serves) exactly as the schema says, description included, on each idempotent operation', () => {
    type Parameter = { name: string; in: string; required: boolean; description: string; schema: object };
    const document = JSON.parse(readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8')) as {
      paths: Record<string, Record<string, { operationId?: string; parameters?: Parameter[] }>>;
    };
    const documented = Object.values(document.paths).flatMap((operations) =>
      Object.values(operations).flatMap((operation) =>
        (operation.parameters ?? [])
          .filter((parameter) => parameter.name === 'idempotency-key')
          .map((parameter) => ({ operationId: operation.operationId, ...parameter })),
      ),
    );
    const { description, ...schema } = JSON.parse(
      JSON.stringify(IdempotencyKeyHeaders.properties['idempotency-key']),
    ) as { description: string };
    assert.deepEqual(documented.map((parameter) => parameter.operationId).sort(), [
      'createPet',
      'placeOrder',
      'recoverWebhookEndpoint',
    ]);
    for (const parameter of documented) {
      assert.deepEqual(
        {
          in: parameter.in,
          required: parameter.required,
          description: parameter.description,
          schema: parameter.schema,
        },
        { in: 'header', required: false, description, schema },
        parameter.operationId,
      );
    }
  });
});

describe('idempotency keys in the domain', () => {
  test('two createPet requests are the same when their values are, an omitted status differing from an explicit one', () => {
    const hash = requestHashOf({ name: 'Rex', categoryId: 1n });
    assert.match(hash, /^[0-9a-f]{64}$/);
    assert.equal(requestHashOf({ name: 'Rex', categoryId: 1n }), hash);
    assert.notEqual(requestHashOf({ name: 'Rex', categoryId: 1n, status: 'available' }), hash);
    assert.notEqual(requestHashOf({ name: 'Rex', categoryId: 2n }), hash);
    assert.notEqual(requestHashOf({ name: 'Rox', categoryId: 1n }), hash);
    // The fields are kept apart: no concatenation makes two requests alike.
    assert.notEqual(
      requestHashOf({ name: 'Rex1', categoryId: 1n }),
      requestHashOf({ name: 'Rex', categoryId: 11n }),
    );
  });

  test('the hashes are exactly the ones stored before (a change would turn every retry into a 422)', () => {
    assert.equal(
      orderRequestHashOf({ petId: 3n }),
      createHash('sha256').update('["placeOrder","3"]').digest('hex'),
    );
    assert.equal(
      requestHashOf({ name: 'Rex', categoryId: 1n }),
      createHash('sha256').update('["Rex","1",null]').digest('hex'),
    );
  });

  test('two placeOrder requests are the same when they name the same animal, and never the same as a createPet', () => {
    assert.equal(orderRequestHashOf({ petId: 3n }), orderRequestHashOf({ petId: 3n }));
    assert.notEqual(orderRequestHashOf({ petId: 3n }), orderRequestHashOf({ petId: 4n }));
    assert.notEqual(
      orderRequestHashOf({ petId: 3n }),
      requestHashOf({ name: 'placeOrder', categoryId: 3n, status: 'available' }),
    );
  });

  test('a claim treats records older than 24 hours as absent', () => {
    assert.equal(IDEMPOTENCY_WINDOW_MS, 86_400_000);
    const at = new Date('2026-11-26T12:00:00.000Z');
    assert.deepEqual(idempotencyClaim('api-hash', 'key-1', 'request-hash', at), {
      apiKeyHash: 'api-hash',
      key: 'key-1',
      requestHash: 'request-hash',
      at,
      expiredBefore: new Date('2026-11-25T12:00:00.000Z'),
    });
  });

  describe('pruning, on a real store (SQLite in memory)', () => {
    let storage: Storage;
    before(async () => {
      storage = await openStorage({
        databaseUrl: 'sqlite::memory:',
        databasePoolSize: 1,
        databaseTimeoutMs: 1_000,
      });
    });
    after(() => storage.close());

    test('a key is forgotten once 24 hours have passed since its use, not before', async () => {
      const at = new Date('2026-11-26T12:00:00.000Z');
      const pet = { name: 'Rex', categoryId: 1n, status: 'available' as const };
      await storage.pets.create({ pet, idempotency: idempotencyClaim('api', 'k', requestHashOf(pet), at) });
      assert.equal(await pruneIdempotencyKeys(storage.idempotency, new Date(at.getTime() + 1)), 0);
      assert.equal(
        await pruneIdempotencyKeys(storage.idempotency, new Date(at.getTime() + IDEMPOTENCY_WINDOW_MS)),
        0,
      );
      assert.equal(
        await pruneIdempotencyKeys(storage.idempotency, new Date(at.getTime() + IDEMPOTENCY_WINDOW_MS + 1)),
        1,
      );
    });
  });
});

describe('errors', () => {
  test('an ApiError carries its code, the status for it, its headers, and an Error body of exactly those', () => {
    const error = new ApiError('conflict', 'the animal is sold', { 'X-Why': 'sold' });
    assert.equal(error.statusCode, 409);
    assert.deepEqual(error.headers, { 'X-Why': 'sold' });
    assert.deepEqual(error.toBody(), { code: 'conflict', message: 'the animal is sold', status: 409 });
    assert.deepEqual(new ApiError('not_found', 'no such pet').headers, {});
  });

  test('unavailable is a 503 with Retry-After of 5 seconds', () => {
    assert.equal(RETRY_AFTER_SECONDS, 5);
    const error = unavailable('the database is away');
    assert.deepEqual(error.toBody(), { code: 'unavailable', message: 'the database is away', status: 503 });
    assert.deepEqual(error.headers, { 'Retry-After': '5' });
  });

  test('everything thrown maps to one Error body, never with internals', () => {
    const body = (error: unknown) => {
      const mapped = toApiError(error);
      return [mapped.toBody(), mapped.headers];
    };
    const same = new ApiError('gone', 'gone for good');
    assert.equal(toApiError(same), same);
    assert.deepEqual(body(new InvalidCursorError('bad cursor')), [
      { code: 'invalid_request', message: 'bad cursor', status: 400 },
      {},
    ]);
    assert.deepEqual(body(new UnknownReferenceError('no pet 9')), [
      { code: 'invalid_request', message: 'no pet 9', status: 400 },
      {},
    ]);
    assert.deepEqual(body(new ConflictError('sold')), [
      { code: 'conflict', message: 'sold', status: 409 },
      {},
    ]);
    assert.deepEqual(body(new StorageUnavailableError('ECONNREFUSED 127.0.0.1:5432')), [
      { code: 'unavailable', message: 'the database is unavailable; retry after a few seconds', status: 503 },
      { 'Retry-After': '5' },
    ]);
    assert.deepEqual(body(new IdempotencyKeyReusedError()), [
      {
        code: 'idempotency_key_reused',
        message: 'this Idempotency-Key was already used with a different request body; use a new key',
        status: 422,
      },
      {},
    ]);
    assert.deepEqual(body(Object.assign(new Error('body/name must be string'), { validation: [{}] })), [
      { code: 'invalid_request', message: 'body/name must be string', status: 400 },
      {},
    ]);
    assert.deepEqual(body({ validation: [{}] }), [
      { code: 'invalid_request', message: 'invalid request', status: 400 },
      {},
    ]);
    for (const [code, expected] of [
      [
        'FST_ERR_CTP_INVALID_MEDIA_TYPE',
        ['unsupported_media_type', 'request body must be application/json', 415],
      ],
      ['FST_ERR_CTP_INVALID_TYPE', ['unsupported_media_type', 'request body must be application/json', 415]],
      ['FST_ERR_CTP_BODY_TOO_LARGE', ['payload_too_large', 'request body is too large', 413]],
      ['FST_ERR_CTP_EMPTY_JSON_BODY', ['invalid_request', 'request body is required', 400]],
      [
        'FST_ERR_CTP_INVALID_CONTENT_LENGTH',
        ['invalid_request', 'Content-Length does not match the body', 400],
      ],
      ['FST_ERR_BAD_URL', ['invalid_request', 'the request URL is malformed', 400]],
      ['FST_ERR_ASYNC_CONSTRAINT', ['invalid_request', 'the request could not be routed', 400]],
    ] as const) {
      assert.deepEqual(
        body(Object.assign(new Error('internal detail'), { code, statusCode: 500 })),
        [{ code: expected[0], message: expected[1], status: expected[2] }, {}],
        code,
      );
    }
    // Any other 4xx keeps its status, with the code for it, or invalid_request when there is none.
    assert.deepEqual(body(Object.assign(new Error('x'), { statusCode: 405 })), [
      { code: 'method_not_allowed', message: 'the request could not be processed', status: 405 },
      {},
    ]);
    assert.deepEqual(body(Object.assign(new Error('x'), { statusCode: 400 })), [
      { code: 'invalid_request', message: 'the request could not be processed', status: 400 },
      {},
    ]);
    assert.deepEqual(body(Object.assign(new Error('x'), { statusCode: 499 })), [
      { code: 'invalid_request', message: 'the request could not be processed', status: 400 },
      {},
    ]);
    assert.deepEqual(body(Object.assign(new Error('x'), { statusCode: 499, code: 'FST_UNKNOWN' })), [
      { code: 'invalid_request', message: 'the request could not be processed', status: 400 },
      {},
    ]);
    // Anything else, 5xx or a status below 400, is an internal error whose message says nothing.
    for (const thrown of [
      new Error('SQLITE_CORRUPT at /var/lib'),
      Object.assign(new Error('x'), { statusCode: 399 }),
      Object.assign(new Error('x'), { statusCode: 500 }),
      'a string',
    ]) {
      assert.deepEqual(body(thrown), [
        { code: 'internal_error', message: 'an unexpected error occurred', status: 500 },
        {},
      ]);
    }
  });
});

describe('validation', () => {
  const schema = {
    type: 'object',
    properties: {
      id: { type: 'integer', format: 'int64' },
      small: { type: 'integer', format: 'int32', minimum: 1, maximum: 10 },
      plain: { type: 'integer' },
      name: { type: 'string', minLength: 1, maxLength: 3 },
      status: { type: 'string', enum: ['available', 'sold'] },
      code: { type: 'string', pattern: '^[a-z]+$', [PATTERN_MESSAGE]: 'must be lower-case letters' },
      bare: { type: 'string', pattern: '^[0-9]+$' },
      flag: { type: 'boolean' },
      list: { type: 'array', items: { type: 'object', properties: { n: { type: 'integer' } } } },
    },
    required: ['name'],
    additionalProperties: false,
  };
  const compile = createValidatorCompiler([]);
  const validatorFor = (httpPart: string) =>
    compile({ schema, httpPart, method: 'POST', url: '/' }) as ((data: unknown) => boolean) & {
      errors?: ErrorObject[];
    };
  /** The value as validated (integers made exact), or the 400's message. */
  const run = (httpPart: string, data: Record<string, unknown>) => {
    const validate = validatorFor(httpPart);
    const copy = { ...data };
    return validate(copy) ? copy : describeValidationErrors(validate.errors ?? [], httpPart);
  };

  test('integers are exact: int64 as bigint within its range, others as numbers within their bounds', () => {
    assert.deepEqual(run('body', { name: 'a', id: 9007199254740993n, small: 10, plain: -3 }), {
      name: 'a',
      id: 9007199254740993n,
      small: 10,
      plain: -3,
    });
    assert.deepEqual(run('body', { name: 'a', id: 5 }), { name: 'a', id: 5n });
    assert.deepEqual(run('body', { name: 'a', id: 9223372036854775807n }), {
      name: 'a',
      id: 9223372036854775807n,
    });
    assert.equal(
      run('body', { name: 'a', id: 9223372036854775808n }),
      'id must be at most 9223372036854775807',
    );
    assert.equal(
      run('body', { name: 'a', id: -9223372036854775809n }),
      'id must be at least -9223372036854775808',
    );
    assert.deepEqual(run('body', { name: 'a', id: -9223372036854775808n }), {
      name: 'a',
      id: -9223372036854775808n,
    });
    assert.equal(run('body', { name: 'a', small: 0 }), 'small must be at least 1');
    assert.equal(run('body', { name: 'a', small: 11 }), 'small must be at most 10');
    assert.deepEqual(run('body', { name: 'a', small: 1 }), { name: 'a', small: 1 });
    assert.deepEqual(run('body', { name: 'a', plain: 2n ** 70n }), { name: 'a', plain: Number(2n ** 70n) });
    assert.equal(run('body', { name: 'a', plain: 1.5 }), 'plain must be an integer');
    assert.equal(
      run('body', { name: 'a', plain: 2 ** 53 }),
      'plain must be an integer',
      'not a safe integer',
    );
    assert.equal(run('body', { name: 'a', plain: '1' }), 'plain must be an integer', 'no coercion in bodies');
    assert.deepEqual(run('body', { name: 'a', list: [{ n: 1 }] }), { name: 'a', list: [{ n: 1 }] });
  });

  test('in a query or path, digits-only text is an integer, and nothing else is', () => {
    assert.deepEqual(run('querystring', { name: 'a', id: '-12', plain: '0' }), {
      name: 'a',
      id: -12n,
      plain: 0,
    });
    for (const text of ['01', '-0x1', '1e3', ' 1', '1 ', '', '-', '+1', '1.0']) {
      assert.equal(
        run('querystring', { name: 'a', plain: text }),
        'plain must be an integer',
        JSON.stringify(text),
      );
    }
    assert.equal(run('querystring', { name: 'a', plain: '1'.repeat(41) }), 'plain must be an integer');
    assert.equal(
      run('querystring', { name: 'a', id: `9${'0'.repeat(39)}` }),
      `id must be at most 9223372036854775807`,
      '40 digits are read',
    );
  });

  test('a 400 names every offending field and why, in one sentence', () => {
    assert.equal(run('body', {}), 'name is required');
    assert.equal(
      run('body', { name: '', status: 'lost', flag: 'yes', code: 'ABC', bare: 'x' }),
      'name must be at least 1 character long; status must be one of available, sold; code must be lower-case letters; bare must match pattern "^[0-9]+$"; flag must be a boolean',
    );
    assert.equal(run('body', { name: 'abcd' }), 'name must be at most 3 characters long');
    assert.equal(run('body', { name: 1 }), 'name must be a string');
    assert.equal(run('body', { name: 'a', list: {} }), 'list must be an array');
    assert.equal(run('body', { name: 'a', list: [{ n: 'x' }] }), 'list.0.n must be an integer');
    assert.equal(run('body', { name: 'a', '': 1 }), '(empty name) is not a known property');
    assert.equal(run('querystring', { name: 'a', x: 1 }), 'x is not a known parameter');
    const many = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`u${i}`, 1]));
    assert.equal(
      run('body', { name: 'a', ...many }),
      'u0 is not a known property; u1 is not a known property; u2 is not a known property; u3 is not a known property; u4 is not a known property; and 3 more unknown properties',
    );
    assert.equal(
      run('querystring', { name: 'a', ...many }),
      'u0 is not a known parameter; u1 is not a known parameter; u2 is not a known parameter; u3 is not a known parameter; u4 is not a known parameter; and 3 more unknown parameters',
    );
    // Only unknown properties are counted among them, whatever else is wrong.
    assert.equal(
      run('body', { flag: 'no', ...many }),
      'name is required; u0 is not a known property; u1 is not a known property; u2 is not a known property; u3 is not a known property; u4 is not a known property; and 3 more unknown properties; flag must be a boolean',
    );
    const six = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`u${i}`, 1]));
    assert.match(
      run('body', { name: 'a', ...six }) as string,
      /u4 is not a known property; and 1 more unknown properties$/,
    );
    // The whole value's own type error names the part it is in.
    assert.equal(
      describeValidationErrors(
        [{ keyword: 'type', instancePath: '', params: { type: 'object' }, schemaPath: '' }],
        'body',
      ),
      'request body must be an object',
    );
    assert.equal(
      describeValidationErrors(
        [{ keyword: 'type', instancePath: '', params: { type: 'object' }, schemaPath: '' }],
        'querystring',
      ),
      'querystring must be an object',
    );
    // The same sentence twice is said once.
    const twice = {
      keyword: 'required',
      instancePath: '',
      params: { missingProperty: 'name' },
      schemaPath: '',
    };
    assert.equal(describeValidationErrors([twice, twice], 'body'), 'name is required');
    assert.equal(
      describeValidationErrors(
        [{ keyword: 'minLength', instancePath: '/name', params: { limit: 2 }, schemaPath: '' }],
        'body',
      ),
      'name must be at least 2 characters long',
    );
  });

  test('schemas keep their integer types for the document; only what is validated changes', () => {
    assert.deepEqual(
      withExactIntegers({ type: 'integer', format: 'int64', minimum: 0, maximum: 5, description: 'd' }),
      {
        description: 'd',
        exactInteger: { int64: true, minimum: 0n, maximum: 5n },
      },
    );
    assert.deepEqual(withExactIntegers({ type: 'integer' }), { exactInteger: { int64: false } });
    assert.deepEqual(withExactIntegers([{ type: 'string' }, 1, null]), [{ type: 'string' }, 1, null]);
    const kept = { enum: [{ type: 'integer' }], const: { type: 'integer' }, default: { type: 'integer' } };
    assert.deepEqual(withExactIntegers(kept), kept);
  });

  test('a shared schema is compiled once and found by its $id', () => {
    const shared = { $id: 'Thing', type: 'object', properties: { n: { type: 'integer', format: 'int64' } } };
    const withShared = createValidatorCompiler([shared]);
    const body = withShared({ schema: { $id: 'Thing' }, httpPart: 'body', method: 'POST', url: '/' }) as (
      d: unknown,
    ) => boolean;
    const text = withShared({
      schema: { $id: 'Thing' },
      httpPart: 'querystring',
      method: 'GET',
      url: '/',
    }) as (d: unknown) => boolean;
    const a = { n: 1 };
    assert.equal(body(a), true);
    assert.deepEqual(a, { n: 1n });
    assert.equal(body({ n: '1' }), false, 'a body is not text');
    const b = { n: '1' };
    assert.equal(text(b), true);
    assert.deepEqual(b, { n: 1n });
  });
});
