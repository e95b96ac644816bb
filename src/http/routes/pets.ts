import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import { GET_PET_DEPRECATED_AT, GET_PET_SUNSET, isRetired } from '../../domain/deprecation.js';
import { DEFAULT_PAGE_SIZE, idSet } from '../../domain/paging.js';
import type { PetCatalog } from '../../domain/pet-catalog.js';
import { ApiError } from '../request/errors.js';
import { ref } from '../schemas/common.js';
import { ListPetsQuery, NewPet, Pet, PetIdParams, Pets } from '../schemas/pet.js';
import { BODY_ERRORS, errorResponse, invalid, otherErrors, response } from '../schemas/responses.js';
import {
  IdempotentCreateHeaders,
  idempotentCreateResponses,
  requestIdempotencyKey,
  sendCreated,
} from './idempotent-create.js';
import { type Links, linkHeader } from './links.js';
import { API_ROUTES_AFTER, repeatable, sendJson, sendWhenReady } from './route-helpers.js';

export interface PetRoutesOptions {
  catalog: PetCatalog;
  links: Links;
  now: () => Date;
}

// Each error response is documented with a message the service really sends for it
// (test/http/openapi-examples.test.ts provokes them and compares). The answers every /v1 operation
// shares (401, 403, 429, 503) are documented by the plugins whose hooks give them; each route declares
// the scope it needs in its config (scopes.ts).

// RFC 9745 (Deprecation, a structured-field date) and RFC 8594 (Sunset, an HTTP-date).
const DEPRECATION = `@${Math.floor(GET_PET_DEPRECATED_AT.getTime() / 1000)}`;
const SUNSET = GET_PET_SUNSET.toUTCString();
const GONE = `getPet was removed on ${SUNSET}; use GET /v1/pets?id=<petId>`;
const NOT_FOUND = 'no animal has this id';

const routes: FastifyPluginAsyncTypebox<PetRoutesOptions> = async (app, { catalog, links, now }) => {
  app.get(
    '/pets',
    {
      config: { scope: 'pets:read' },
      preValidation: repeatable('id'),
      schema: {
        operationId: 'listPets',
        summary: 'List animals',
        description:
          'Animals in ascending `id` order, at most `limit` of them, optionally only those with a `status` or ' +
          "only some ids (`?id=3&id=17`, up to 100: getPet's replacement; ids that do not exist are simply " +
          'absent). While more may exist the response carries `Link: <…>; rel="next"` (RFC 8288): follow it to ' +
          'walk every animal exactly once, even while others are being added; the cursor in it is good only ' +
          'with the same filters. The last page has no such link. The body is a bare array.',
        tags: ['pets'],
        querystring: ListPetsQuery,
        response: {
          200: response('A page of animals', Pets, {
            Link: Type.String({
              description: '`<…/v1/pets?…&cursor=…>; rel="next"` while more animals may exist.',
            }),
          }),
          400: invalid(
            'Invalid `limit`, `status`, `id` or `cursor`; more than 100 `id`s',
            'limit must be at most 100',
          ),
          default: otherErrors('GET, HEAD, POST'),
        },
      },
    },
    // Not async: on SQLite the page is ready at once and sent without a promise (sendWhenReady).
    (request, reply) => {
      // Ajv fills in the default; the fallback only satisfies the type.
      const { limit = DEFAULT_PAGE_SIZE, status, id: ids, cursor } = request.query;
      return sendWhenReady(catalog.listJson({ limit, status, ids, cursor }), (page) => {
        if (page.nextCursor)
          reply.header(
            'Link',
            linkHeader(links.petsPage(limit, status, page.nextCursor, ids && idSet(ids)), 'next'),
          );
        return sendJson(reply, page.json);
      });
    },
  );

  app.post(
    '/pets',
    {
      config: { scope: 'pets:write' },
      schema: {
        operationId: 'createPet',
        summary: 'Add an animal',
        description:
          'Stores a new animal and returns it with its assigned `id`. A `201` means it is durably stored. ' +
          'JSON types are strict (nothing is coerced), integers must be integer literals, and any property ' +
          'not in NewPet is refused.',
        tags: ['pets'],
        headers: IdempotentCreateHeaders,
        body: ref(NewPet),
        response: {
          ...idempotentCreateResponses(
            'Animal added, or (with a reused `Idempotency-Key`) the animal first added',
            ref(Pet),
            'animal',
          ),
          400: invalid(
            'Body missing required fields, or containing invalid values or unknown properties; or a malformed `Idempotency-Key`',
            'categoryId must be an integer',
          ),
          default: otherErrors('GET, HEAD, POST'),
          ...BODY_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const { pet, replayed } = await catalog.create({
        caller: request.apiKeyHash,
        pet: request.body,
        idempotencyKey: requestIdempotencyKey(request.headers),
      });
      return sendCreated(reply, links.pet(pet.id), pet, replayed);
    },
  );

  const deprecationLink = linkHeader(links.listPetsDocs(), 'deprecation', 'text/html');
  const documentedDeprecationHeaders = {
    Deprecation: Type.String({
      description: `RFC 9745: deprecated since ${GET_PET_DEPRECATED_AT.toISOString()}.`,
    }),
    Sunset: Type.String({ description: `RFC 8594: ${SUNSET}; from then on the operation answers 410.` }),
    Link: Type.String({
      description: '`rel="deprecation"`: documentation of the replacement, `GET /v1/pets?id=…`.',
    }),
  };

  app.get(
    '/pets/:petId',
    {
      config: { scope: 'pets:read' },
      schema: {
        operationId: 'getPet',
        summary: 'Fetch one animal (deprecated)',
        description:
          `Deprecated: use \`GET /v1/pets?id=…\` (the \`id\` filter, up to 100 ids at once). Removed on ${SUNSET}: from that instant ` +
          'it answers `410 gone`. Every response carries `Deprecation`, `Sunset` and a `rel="deprecation"` `Link`.',
        tags: ['pets'],
        deprecated: true,
        params: PetIdParams,
        response: {
          200: response('Animal found', ref(Pet), documentedDeprecationHeaders),
          400: invalid('`petId` is not an integer from 1 to 2^63-1', 'petId must be an integer'),
          default: otherErrors('GET, HEAD'),
          404: errorResponse('No animal has this id', { not_found: NOT_FOUND }, documentedDeprecationHeaders),
          410: errorResponse(
            'The operation has been removed (past its sunset)',
            { gone: GONE },
            documentedDeprecationHeaders,
          ),
        },
      },
      // Past the sunset the operation is gone, whatever petId says: checked before validation.
      preValidation: (_request, _reply, done) =>
        done(isRetired(now()) ? new ApiError('gone', GONE) : undefined),
      // onSend, not onRequest: it also runs for responses that hooks before this route produce (401).
      onSend: (_request, reply, payload, done) => {
        reply.header('Deprecation', DEPRECATION).header('Sunset', SUNSET).header('Link', deprecationLink);
        done(null, payload);
      },
    },
    // Not async, as listPets.
    (request, reply) =>
      sendWhenReady(catalog.findJson(request.params.petId), (pet) => {
        if (pet === undefined) throw new ApiError('not_found', NOT_FOUND);
        return sendJson(reply, pet);
      }),
  );
};

/** The pets operations, behind authentication and rate limits, described in the OpenAPI document. */
export const petRoutes = fp(routes, {
  name: 'pet-routes',
  fastify: '5.x',
  dependencies: API_ROUTES_AFTER,
});
