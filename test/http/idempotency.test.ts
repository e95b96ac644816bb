import assert from 'node:assert/strict';
import { hashApiKey } from '../../src/domain/api-keys.js';
import { after, backends, before, type TestDatabase, test } from '../support/backends.js';
import { queryDatabase } from '../support/db-inspect.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

interface PetBody {
  id: number;
  name: string;
  categoryId: number;
  status: string;
}

/** A second client, with a key of its own. */
const OTHER_KEY = 'other-key-0123456789abcdef';
/** A clock the tests move; before getPet's sunset, so pets can be read back. */
let clock = new Date('2027-01-01T00:00:00Z');
const HOUR_MS = 60 * 60 * 1000;

let counter = 0;
/** A key no other test uses. */
const freshKey = () => `key-${process.pid}-${Date.now()}-${++counter}`;

/** Every row of idempotency_keys, read straight from the database. */
const storedRecords = (database: TestDatabase) =>
  queryDatabase(database.url, 'SELECT * FROM idempotency_keys');

for (const backend of backends) {
  backend.describe(`createPet with Idempotency-Key (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({
        backend,
        now: () => clock,
        env: { PETSTORE_API_KEYS: `${TEST_KEY},${OTHER_KEY}` },
      });
    });
    after(() => server.close());

    const create = (key: string | undefined, body: unknown, apiKey = TEST_KEY) =>
      server.request('POST', '/v1/pets', {
        body,
        key: apiKey,
        headers: key === undefined ? {} : { 'Idempotency-Key': key },
      });

    test('when the same key and body are sent twice, then the second answer is the first 201, same pet and Location, and nothing new is stored', async () => {
      const key = freshKey();
      const first = await create(key, { name: 'Rex', categoryId: 1 });
      assert.equal(first.status, 201, first.text);
      assert.equal(first.headers.get('idempotent-replayed'), null);
      const before = await server.storage.pets.count();

      // The same values, in another key order and spacing: still the same request.
      const second = await create(key, '{ "categoryId": 1,  "name": "Rex" }');
      assert.equal(second.status, 201, second.text);
      assert.equal(second.text, first.text);
      assert.equal(second.headers.get('location'), first.headers.get('location'));
      assert.equal(second.headers.get('idempotent-replayed'), 'true');
      assert.equal(await server.storage.pets.count(), before);
    });

    test('when the same key arrives in 12 concurrent requests, then exactly one pet is created and every answer is it', async () => {
      const key = freshKey();
      const before = await server.storage.pets.count();
      const answers = await Promise.all(
        Array.from({ length: 12 }, () => create(key, { name: 'Racer', categoryId: 2, status: 'sold' })),
      );
      for (const answer of answers) assert.equal(answer.status, 201, answer.text);
      assert.equal(new Set(answers.map((a) => a.text)).size, 1, 'one pet in every answer');
      assert.equal(answers.filter((a) => a.headers.get('idempotent-replayed') === null).length, 1);
      assert.equal(await server.storage.pets.count(), before + 1);
    });

    test('when the same key is sent with a different body, then 422 idempotency_key_reused and nothing is created', async () => {
      const key = freshKey();
      assert.equal((await create(key, { name: 'Tom', categoryId: 3 })).status, 201);
      const before = await server.storage.pets.count();
      for (const body of [
        { name: 'Tom', categoryId: 4 },
        { name: 'Tom', categoryId: 3, status: 'available' },
      ]) {
        const res = await create(key, body);
        assert.equal(res.status, 422, res.text);
        assert.deepEqual(res.json(), {
          code: 'idempotency_key_reused',
          message: 'this Idempotency-Key was already used with a different request body; use a new key',
          status: 422,
        });
      }
      assert.equal(await server.storage.pets.count(), before);
    });

    test('when a request with a key is refused as invalid, then the key is not used up and the corrected request creates the pet', async () => {
      const key = freshKey();
      const refused = await create(key, { name: 'Fixed', categoryId: 'one' });
      assert.equal(refused.status, 400, refused.text);
      const corrected = await create(key, { name: 'Fixed', categoryId: 1 });
      assert.equal(corrected.status, 201, corrected.text);
      assert.equal(corrected.headers.get('idempotent-replayed'), null);
    });

    test('when two API keys send the same Idempotency-Key, then each gets a pet of its own', async () => {
      const key = freshKey();
      const mine = await create(key, { name: 'Mine', categoryId: 5 });
      const theirs = await create(key, { name: 'Theirs', categoryId: 6 }, OTHER_KEY);
      assert.equal(mine.status, 201, mine.text);
      assert.equal(theirs.status, 201, theirs.text);
      assert.notEqual(mine.json<PetBody>().id, theirs.json<PetBody>().id);
      assert.equal(theirs.json<PetBody>().name, 'Theirs');
    });

    test('when a key is stored, then the database holds the API key only as its SHA-256, never the key itself', async () => {
      const key = freshKey();
      assert.equal((await create(key, { name: 'Hashed', categoryId: 7 })).status, 201);
      const rows = (await storedRecords(server.database)).filter((row) => row.key === key);
      assert.equal(rows.length, 1);
      assert.equal(rows[0]?.api_key_hash, hashApiKey(TEST_KEY));
      assert.ok(!JSON.stringify(await storedRecords(server.database)).includes(TEST_KEY));
    });

    test('when the key is sent as a Structured Field string, then it is the same key as the bare value', async () => {
      const key = freshKey();
      const bare = await create(key, { name: 'Quoted', categoryId: 8 });
      const quoted = await create(`"${key}"`, { name: 'Quoted', categoryId: 8 });
      assert.equal(quoted.status, 201, quoted.text);
      assert.equal(quoted.text, bare.text);
      assert.equal(quoted.headers.get('idempotent-replayed'), 'true');
    });

    test('when more than 24 hours have passed, then the same key creates a new pet', async () => {
      const key = freshKey();
      const first = await create(key, { name: 'Old', categoryId: 9 });
      clock = new Date(clock.getTime() + 24 * HOUR_MS + 1);
      const later = await create(key, { name: 'Old', categoryId: 9 });
      assert.equal(later.status, 201, later.text);
      assert.notEqual(later.json<PetBody>().id, first.json<PetBody>().id);
      assert.equal(later.headers.get('idempotent-replayed'), null);
      // And within the next 24 hours that new pet is the one replayed.
      clock = new Date(clock.getTime() + 23 * HOUR_MS);
      assert.equal((await create(key, { name: 'Old', categoryId: 9 })).text, later.text);
    });

    test('when expired keys are pruned, then only records older than 24 hours are deleted', async () => {
      const key = freshKey();
      assert.equal((await create(key, { name: 'Kept', categoryId: 10 })).status, 201);
      const at = clock.getTime();
      const stored = await storedRecords(server.database);
      assert.ok(stored.length > 1, 'earlier tests left older records');
      assert.equal(await server.storage.idempotency.prune(new Date(at - 1)), stored.length - 1);
      assert.deepEqual(
        (await storedRecords(server.database)).map((row) => row.key),
        [key],
        'only the record created at the cut-off instant survives',
      );
      assert.equal(await server.storage.idempotency.prune(new Date(at + 1)), 1);
    });

    for (const [what, value] of [
      ['empty', ''],
      ['longer than 255 characters', 'k'.repeat(256)],
      ['containing a space', 'two words'],
      ['containing a control character', 'tab\there'],
      ['non-ASCII', 'clé'],
    ] as const) {
      test(`when the Idempotency-Key is ${what}, then 400 invalid_request and nothing is created`, async () => {
        const before = await server.storage.pets.count();
        const res = await create(value, { name: 'Bad key', categoryId: 11 });
        assert.equal(res.status, 400, res.text);
        const body = res.json<{ code: string; message: string }>();
        assert.equal(body.code, 'invalid_request');
        assert.match(body.message, /idempotency-key/);
        assert.equal(await server.storage.pets.count(), before);
      });
    }

    test('when a key of exactly 255 visible characters is sent, then it is accepted', async () => {
      const res = await create(`${freshKey()}-`.padEnd(255, '~'), { name: 'Long key', categoryId: 12 });
      assert.equal(res.status, 201, res.text);
    });
  });
}
