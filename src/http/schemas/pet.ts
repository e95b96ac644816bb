import { type Static, Type } from 'typebox';
import { PET_STATUSES, type Pet as PetModel, type PetStatus as PetStatusValue } from '../../domain/pet.js';
import { PATTERN_MESSAGE } from '../request/validation.js';
import { Cursor, Int64, Limit, ref, SelectedIds } from './common.js';

/**
 * The pets resource as the contract states it. These schemas validate requests, type the handlers,
 * drive serialisation and are the OpenAPI document's components: the one copy of the contract.
 */

// Examples, as the OpenAPI document and a docs page show them; a test checks each against its schema.
const REX = { id: 1, name: 'Rex', categoryId: 1, status: 'available' };
const LUNA = { id: 2, name: 'Luna', categoryId: 3, status: 'sold' };

export const PetStatus = Type.Unsafe<PetStatusValue>({
  $id: 'PetStatus',
  type: 'string',
  enum: [...PET_STATUSES],
  description: 'Availability of an animal: set on creation, usable as a list filter.',
});

export const NewPet = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: 255,
      // Not blank; no C0 control characters or DEL; no unpaired surrogate (so every backend stores
      // exactly what it acknowledged). Lengths count Unicode code points.
      // The group is optional so that an empty name is reported once, by minLength.
      pattern: '^((?=[\\s\\S]*\\S)[^\\u0000-\\u001F\\u007F\\uD800-\\uDFFF]*)?$',
      [PATTERN_MESSAGE]: 'must not be blank nor contain control characters or unpaired surrogates',
      description: "The animal's name: 1 to 255 characters, stored and returned exactly as sent.",
    }),
    categoryId: Int64({ description: 'Identifier of the category the animal belongs to (int64, exact).' }),
    status: Type.Optional(
      Type.Unsafe<Static<typeof PetStatus>>({
        ...ref(PetStatus),
        description: 'Availability status; `available` when omitted.',
      }),
    ),
  },
  {
    $id: 'NewPet',
    additionalProperties: false,
    description: 'The request body for adding an animal. Any other property, `id` included, is refused.',
    examples: [{ name: REX.name, categoryId: REX.categoryId }],
  },
);

export const Pet = Type.Object(
  {
    id: Int64({ description: 'Unique identifier, assigned by the service on creation.', minimum: 1 }),
    name: Type.String({ description: "The animal's name." }),
    categoryId: Int64({ description: 'Identifier of the category the animal belongs to.' }),
    status: ref(PetStatus),
  },
  { $id: 'Pet', additionalProperties: false, description: 'An animal as returned.', examples: [REX] },
);

export const Pets = Type.Array(ref(Pet), {
  $id: 'Pets',
  description: 'A page of animals in ascending id order.',
  examples: [[REX, LUNA]],
});

export const ListPetsQuery = Type.Object(
  {
    limit: Type.Optional(Limit('animals')),
    status: Type.Optional(
      Type.Unsafe<Static<typeof PetStatus>>({
        ...ref(PetStatus),
        description: 'Only animals with this status.',
      }),
    ),
    id: Type.Optional(SelectedIds('animals')),
    cursor: Type.Optional(Cursor()),
  },
  // Like unknown body properties, an unknown parameter (a typo: `stauts`, `LIMIT`) is refused, not ignored.
  { additionalProperties: false },
);

export const PetIdParams = Type.Object({
  petId: Int64({ description: 'Identifier of the animal to retrieve (1 to 2^63-1).', minimum: 1 }),
});

/** Shared schemas, registered once with Fastify, the validator and the OpenAPI generator. */
export const PET_SCHEMAS = [PetStatus, NewPet, Pet, Pets];

// Compile-time proof that the response schema and the domain type agree.
const _petMatchesModel: PetModel = {} as Static<typeof Pet>;
void _petMatchesModel;
