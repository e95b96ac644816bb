import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sqlite } from './backends.js';
import { startTestServer, type TestServer } from './test-server.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const error = (code: string, status: number, message = 'a message') =>
  JSON.stringify({ code, message, status });
const PET = JSON.stringify({ id: 1, name: 'Rex', categoryId: 1, status: 'available' });

// The check every server.request runs: if it accepted anything, no test of the suite would notice a drift.
describe('the OpenAPI contract check', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ backend: sqlite });
  });
  after(() => server.close());

  const check = (method: string, path: string, status: number, body: string) => () =>
    server.contract.check(method, path, status, JSON_TYPE, body);

  test('when a response is one the document lists, then the check accepts it', () => {
    check('GET', '/v1/pets/1', 200, PET)();
    check('GET', '/v1/pets/1', 404, error('not_found', 404))();
    // The statuses the `default` response documents by example (405, 417, 431, 500) are listed too.
    check('GET', '/v1/pets/1', 500, error('internal_error', 500))();
    check('GET', '/v1/nowhere', 404, error('not_found', 404))();
  });

  test('when an operation answers a status it does not list, then the check rejects it, though `default` would describe the body', () => {
    assert.throws(check('GET', '/v1/pets', 418, error('invalid_request', 418)), /answered 418/);
    assert.throws(check('GET', '/v1/pets', 404, error('not_found', 404)), /answered 404/);
    assert.throws(check('GET', '/v1/pets/1', 409, error('conflict', 409)), /answered 409/);
    assert.throws(check('POST', '/v1/store/orders', 410, error('gone', 410)), /answered 410/);
  });

  test("when an Error body's status is not the HTTP status, then the check rejects it", () => {
    assert.throws(
      check('POST', '/v1/store/orders', 409, error('not_found', 404)),
      /says status 404, the HTTP status is 409/,
    );
    assert.throws(check('GET', '/v1/nowhere', 404, error('invalid_request', 400)), /says status 400/);
  });

  test('when an Error body carries a code with a status not its own, then the check rejects it', () => {
    assert.throws(
      check('POST', '/v1/store/orders', 409, error('not_found', 409)),
      /the code not_found travels with 404, not 409/,
    );
  });

  test('when a body breaks its schema, then the check rejects it', () => {
    assert.throws(check('GET', '/v1/pets/1', 200, JSON.stringify({ id: 1 })), /does not match/);
    assert.throws(
      check(
        'GET',
        '/v1/pets/1',
        200,
        JSON.stringify({ id: '1', name: 'Rex', categoryId: 1, status: 'available' }),
      ),
      /does not match/,
    );
    assert.throws(
      check(
        'GET',
        '/v1/pets/1',
        404,
        JSON.stringify({ code: 'not_found', message: 'x', status: 404, stack: 'at' }),
      ),
      /does not match/,
    );
    assert.throws(
      check('GET', '/v1/pets/1', 404, JSON.stringify({ code: 'not_found', status: 404 })),
      /does not match/,
    );
    assert.throws(check('GET', '/v1/nowhere', 404, JSON.stringify({ error: 'Not Found' })), /does not match/);
  });

  test('when a JSON answer is sent with another content type, then the check rejects it', () => {
    assert.throws(
      () => server.contract.check('GET', '/v1/pets/1', 200, 'application/json', PET),
      /content type/,
    );
  });
});
