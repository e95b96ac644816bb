import assert from 'node:assert/strict';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { after, before, httpLayerBackends, test } from '../support/backends.js';
import { assertError } from '../support/error-body.js';
import { captureLog } from '../support/log-capture.js';
import {
  invalidParameters,
  type Json,
  objectBody,
  type Part,
  parameterPart,
  refusalMessage,
  resolve,
} from '../support/openapi-arbitraries.js';
import { walkLinks } from '../support/paging.js';
import { propertyRuns } from '../support/property-runs.js';
import { rawRequest } from '../support/raw-json.js';
import { startTestServer, type TestResponse, type TestServer } from '../support/test-server.js';

/**
 * Property-based tests: requests generated from the OpenAPI document the service serves (the NewPet
 * schema and the listPets/getPet parameters), valid and invalid, against the live server. Whatever is
 * sent: never a 5xx; every response matches the document (rawRequest checks each one); a refused
 * request changes nothing; an accepted pet reads back identical, by id and in the list.
 * Runs are bounded (NUM_RUNS per property, PETSTORE_TEST_PROPERTY_RUNS for more); a failure prints
 * fast-check's seed and the shrunk request. On SQLite: the HTTP layer is the same on either backend.
 */

const NUM_RUNS = propertyRuns(120);

/** The request content codings the service decodes (DECISIONS.md), and how to encode a body in each. */
const ENCODERS: Record<string, (body: Buffer) => Buffer> = {
  gzip: (body) => gzipSync(body),
  deflate: (body) => deflateSync(body),
  br: (body) => brotliCompressSync(body),
  identity: (body) => body,
};

/** A pet with every value as text, so int64 values compare exactly. */
interface PetText {
  id: string;
  name: string;
  categoryId: string;
  status: string;
}

const asText = (pet: Json): PetText => ({
  id: String(pet.id),
  name: pet.name as string,
  categoryId: String(pet.categoryId),
  status: pet.status as string,
});

for (const backend of httpLayerBackends) {
  backend.describe(`properties of requests generated from the OpenAPI document (${backend.name})`, () => {
    let server: TestServer;
    let doc: Json;
    /** The store as it must be, in id order. */
    const model: PetText[] = [];

    /** The service's log lines, as JSON. */
    const { lines: logLines, logger } = captureLog('info');

    before(async () => {
      server = await startTestServer({
        backend,
        now: () => new Date('2027-01-01T00:00:00Z'),
        logger,
      });
      // The document as served, fetched like any client would.
      const res = await fetch(`${server.url}/v1/openapi.json`);
      assert.equal(res.status, 200);
      doc = (await res.json()) as Json;
      // A few pets of every status, so lists and filters have something to show.
      for (const [i, status] of ['available', 'pending', 'sold', 'sold', 'pending'].entries()) {
        const created = await server.request('POST', '/v1/pets', {
          body: { name: `seed ${i}`, categoryId: i, status },
        });
        assert.equal(created.status, 201);
        model.push(asText(created.exact<Json>()));
      }
    });
    after(() => server.close());

    /** An operation of the served document, e.g. operation('/pets', 'post'). */
    const operation = (path: string, method: string) =>
      ((doc.paths as Json)[path] as Record<string, Json>)[method] as Json;
    const parameters = (path: string, method: string) =>
      (operation(path, method).parameters as Json[]).map((p) => ({
        name: p.name as string,
        in: p.in as string,
        schema: p.schema as Json,
      }));

    async function walk(): Promise<PetText[]> {
      const pages = await walkLinks('/v1/pets?limit=100', (path) => rawRequest(server, 'GET', path));
      return pages.flatMap((page) => page.exact<Json[]>().map(asText));
    }

    /** NewPet bodies derived from the served document, half of them valid: valid ones are rare among random ones. */
    function newPetBodies() {
      const newPet = (
        ((operation('/pets', 'post').requestBody as Json).content as Json)['application/json'] as Json
      ).schema as Json;
      const anyBody = objectBody(doc, newPet);
      return fc.oneof(
        anyBody,
        anyBody.filter((body) => body.valid),
      );
    }

    /** An accepted body's pet is stored exactly as the body says, with the default status. */
    function assertStoredAsSent(res: TestResponse, body: { values: Record<string, string> }): PetText {
      const pet = asText(res.exact<Json>());
      assert.deepEqual(pet, {
        id: pet.id,
        name: body.values.name,
        categoryId: body.values.categoryId,
        status: body.values.status ?? 'available',
      });
      return pet;
    }

    function assertNo5xx(res: TestResponse, what: string): void {
      assert.ok(res.status < 500, `${what} answered ${res.status}: ${res.text}`);
    }

    test('when any NewPet body derived from the document is POSTed, then never a 5xx; a refused one stores nothing and an accepted one reads back identical by id and in the list', async () => {
      const bodies = newPetBodies();
      let accepted = 0;
      let refused = 0;
      await fc.assert(
        fc.asyncProperty(bodies, async (body) => {
          const res = await rawRequest(server, 'POST', '/v1/pets', {
            body: body.text,
            headers: { 'content-type': 'application/json' },
          });
          assertNo5xx(res, `POST ${body.text}`);
          if (body.valid) {
            accepted++;
            assert.equal(res.status, 201, `${body.text} → ${res.text}`);
            const pet = assertStoredAsSent(res, body);
            const read = await rawRequest(server, 'GET', `/v1/pets/${pet.id}`);
            assert.equal(read.status, 200);
            assert.equal(read.text, res.text);
            model.push(pet);
          } else {
            refused++;
            assertError(res, 400, 'invalid_request', refusalMessage(body), body.text);
          }
          assert.deepEqual(await walk(), model);
        }),
        { numRuns: NUM_RUNS },
      );
      // Both halves of the property were exercised.
      assert.ok(accepted > 10 && refused > 10, `accepted ${accepted}, refused ${refused}`);
    });

    test('when any NewPet body is sent in any content coding, then gzip, deflate, br and identity (any case) answer as if it were sent plain, and any other coding is a 415 that stores nothing', async () => {
      const bodies = newPetBodies();
      const codings = fc.oneof(
        fc
          .constantFrom(...Object.keys(ENCODERS))
          .chain((coding) =>
            fc.constantFrom(coding, coding.toUpperCase(), coding[0]?.toUpperCase() + coding.slice(1)),
          ),
        fc.constantFrom('x-unknown', 'compress', 'zstd', 'gzip, gzip', 'br, identity'),
        fc.stringMatching(/^[a-z][a-z0-9-]{0,11}$/).filter((c) => !Object.hasOwn(ENCODERS, c)),
      );
      const seen = { decoded: 0, refused: 0 };
      await fc.assert(
        fc.asyncProperty(bodies, codings, async (body, coding) => {
          const before = await walk();
          const name = coding.toLowerCase();
          const encode = Object.hasOwn(ENCODERS, name) ? ENCODERS[name] : undefined;
          const res = await rawRequest(server, 'POST', '/v1/pets', {
            body: encode ? encode(Buffer.from(body.text)) : Buffer.from(body.text),
            headers: { 'content-type': 'application/json', 'content-encoding': coding },
          });
          assertNo5xx(res, `POST (${coding}) ${body.text}`);
          if (!encode) {
            seen.refused++;
            assert.equal(res.status, 415, `${coding}: ${res.text}`);
            assert.equal(res.json<Json>().code, 'unsupported_media_type');
            assert.equal(res.headers.get('accept-encoding'), 'gzip, deflate, br');
            assert.deepEqual(await walk(), before);
            return;
          }
          seen.decoded++;
          if (body.valid) {
            assert.equal(res.status, 201, `${coding} ${body.text} → ${res.text}`);
            const pet = assertStoredAsSent(res, body);
            model.push(pet);
          } else {
            assertError(res, 400, 'invalid_request', refusalMessage(body), `${coding} ${body.text}`);
          }
          assert.deepEqual(await walk(), model);
        }),
        { numRuns: NUM_RUNS },
      );
      assert.ok(seen.decoded > 10 && seen.refused > 10, JSON.stringify(seen));
    });

    test('when any listPets query derived from the document is sent, then never a 5xx; a valid one returns exactly the matching pets and an invalid one a 400 that changes nothing', async () => {
      const params = parameters('/pets', 'get').filter((p) => p.in === 'query');
      const byName = Object.fromEntries(params.map((p) => [p.name, p]));
      // `id` (a repeated parameter) has properties of its own: test/http/select-by-id.test.ts.
      assert.deepEqual(Object.keys(byName).sort(), ['cursor', 'id', 'limit', 'status']);
      const anyQuery = fc.record({
        limit: fc.option(parameterPart(doc, byName.limit?.schema as Json), { nil: undefined }),
        status: fc.option(parameterPart(doc, byName.status?.schema as Json), { nil: undefined }),
        // Any cursor a client makes up is invalid: only the service's own are accepted.
        cursor: fc.option(
          parameterPart(doc, byName.cursor?.schema as Json).map((part) => ({ ...part, valid: false })),
          { freq: 5, nil: undefined },
        ),
      });
      const allValid = (q: Record<string, Part | undefined>) =>
        Object.values(q).every((part) => part === undefined || part.valid);
      // Half the queries are valid ones: valid queries are rare among random ones.
      const query = fc.oneof(anyQuery, anyQuery.filter(allValid));
      let valid = 0;
      let invalid = 0;
      const defaultLimit = Number(
        (resolve(doc, byName.limit?.schema as Json).default as number | undefined) ?? 20,
      );
      await fc.assert(
        fc.asyncProperty(query, async (q) => {
          const search = new URLSearchParams();
          for (const [name, part] of Object.entries(q)) if (part) search.append(name, part.text);
          const path = `/v1/pets?${search}`;
          const before = await walk();
          const res = await rawRequest(server, 'GET', path);
          assertNo5xx(res, `GET ${path}`);
          if (allValid(q)) {
            valid++;
            assert.equal(res.status, 200, `${path} → ${res.text}`);
            const limit = q.limit ? Number(q.limit.text) : defaultLimit;
            const matching = before.filter((pet) => q.status === undefined || pet.status === q.status.text);
            assert.deepEqual(res.exact<Json[]>().map(asText), matching.slice(0, limit));
            assert.equal(res.headers.get('link') !== null, matching.length > limit, `Link on ${path}`);
          } else {
            invalid++;
            assertError(res, 400, 'invalid_request', { names: invalidParameters(q) }, path);
          }
          assert.deepEqual(await walk(), before);
        }),
        { numRuns: NUM_RUNS },
      );
      assert.ok(valid > 10 && invalid > 10, `valid ${valid}, invalid ${invalid}`);
    });

    test('when any listPets query also carries parameters the operation does not define, then 400 naming them, and the log line keeps the values of limit, status, id and cursor but none of the others', async () => {
      const params = parameters('/pets', 'get').filter((p) => p.in === 'query');
      const defined = new Set(params.map((p) => p.name));
      const definedPart = fc.tuple(
        fc.constantFrom(...params),
        fc.oneof(fc.constantFrom('5', 'sold', 'available', ''), fc.string({ maxLength: 12 })),
      );
      // Names a client might put a key under, or any other; values shaped like keys.
      const unknownName = fc
        .oneof(
          fc.constantFrom('api_key', 'access_token', 'key', 'token', 'Limit', 'stauts', 'status[]'),
          fc.string({ minLength: 1, maxLength: 30 }),
        )
        .filter((name) => !defined.has(name));
      const secret = fc
        .uint8Array({ minLength: 32, maxLength: 32 })
        .map((bytes) => `pst_${Buffer.from(bytes).toString('base64url')}`);
      const queries = fc.record({
        known: fc.array(definedPart, { maxLength: 3 }),
        unknown: fc.array(fc.tuple(unknownName, secret), { minLength: 1, maxLength: 4 }),
      });
      let count = 0;
      await fc.assert(
        fc.asyncProperty(queries, async ({ known, unknown }) => {
          const pairs: [string, string][] = [
            ...known.map(([p, v]): [string, string] => [p.name, v]),
            ...unknown,
          ];
          const query = pairs.map(([name, value]) => new URLSearchParams([[name, value]]).toString());
          const path = `/v1/pets?${query.join('&')}`;
          const requestId = `query-${++count}`;
          const res = await rawRequest(server, 'GET', path, { headers: { 'x-request-id': requestId } });
          assert.equal(res.status, 400, `${path} → ${res.status} ${res.text}`);
          assert.equal(res.json<Json>().code, 'invalid_request');
          assert.match(res.json<{ message: string }>().message, /is not a known parameter/);
          const line = logLines.find((l) => l.requestId === requestId && 'url' in l);
          assert.ok(line, `no log line for ${path}`);
          const loggedQuery = String(line.url).split('?')[1]?.split('&');
          assert.equal(loggedQuery?.length, pairs.length, String(line.url));
          for (const [i, [name]] of pairs.entries()) {
            const sent = query[i] as string;
            const sentName = sent.slice(0, sent.indexOf('='));
            const expected = defined.has(name)
              ? sent
              : `${sentName.length <= 15 ? sentName : '[redacted]'}=[redacted]`;
            assert.equal(loggedQuery?.[i], expected, `${path} logged as ${line.url}`);
          }
          for (const [, value] of unknown)
            assert.ok(!JSON.stringify(logLines).includes(value), 'a secret was logged');
        }),
        { numRuns: NUM_RUNS },
      );
    });

    test('when any getPet petId derived from the document is asked for, then never a 5xx: 200 with the stored pet, 404 for an unknown id, 400 for an invalid one, and nothing changes', async () => {
      const [petId] = parameters('/pets/{petId}', 'get');
      assert.equal(petId?.name, 'petId');
      const known = fc
        .constantFrom(...model.map((pet) => pet.id))
        .map((id): Part => ({ text: id, valid: true }));
      // An empty petId would be another path (/v1/pets/), not this operation.
      const ids = fc.oneof(
        known,
        parameterPart(doc, petId?.schema as Json).filter((part) => part.text !== ''),
      );
      let found = 0;
      let missing = 0;
      let invalid = 0;
      const before = await walk();
      await fc.assert(
        fc.asyncProperty(ids, async (id) => {
          // A lone surrogate cannot be percent-encoded: it travels as U+FFFD, still not an integer.
          const path = `/v1/pets/${encodeURIComponent(Buffer.from(id.text).toString())}`;
          const res = await rawRequest(server, 'GET', path);
          assertNo5xx(res, `GET ${path}`);
          if (!id.valid) {
            invalid++;
            assertError(res, 400, 'invalid_request', { names: ['petId'] }, path);
            return;
          }
          const pet = before.find((p) => p.id === String(BigInt(id.text)));
          if (pet) {
            found++;
            assert.equal(res.status, 200, `${path} → ${res.text}`);
            assert.deepEqual(asText(res.exact<Json>()), pet);
          } else {
            missing++;
            assert.equal(res.status, 404, `${path} → ${res.status} ${res.text}`);
            assert.equal(res.json<Json>().code, 'not_found');
          }
        }),
        { numRuns: NUM_RUNS },
      );
      assert.deepEqual(await walk(), before);
      assert.ok(
        found > 5 && missing > 5 && invalid > 5,
        `found ${found}, missing ${missing}, invalid ${invalid}`,
      );
    });
  });
}
