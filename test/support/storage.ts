import Fastify from 'fastify';
import type { Pet } from '../../src/domain/pet.js';
import type { PetRecordInput, Storage } from '../../src/domain/storage.js';
import { PET_SCHEMAS } from '../../src/http/schemas/pet.js';

/** Creates one pet through the storage port, without an Idempotency-Key. */
export const createPet = async (storage: Storage, pet: PetRecordInput): Promise<Pet> =>
  (await storage.pets.create({ pet })).pet;

/**
 * What the API's response serialiser (Fastify's, compiled from the contract's schemas) writes for
 * `value` as the shared schema `name` (Pet, Pets): the bytes a page or a pet had on the wire before
 * the database wrote them.
 */
export async function serialisedAs(name: 'Pet' | 'Pets', value: unknown): Promise<string> {
  const app = Fastify({ logger: false });
  for (const schema of PET_SCHEMAS) app.addSchema(schema);
  app.get('/', { schema: { response: { 200: { $ref: `${name}#` } } } }, async () => value);
  try {
    const res = await app.inject({ method: 'GET', url: '/' });
    if (res.statusCode !== 200) throw new Error(`serialising ${name}: ${res.statusCode} ${res.body}`);
    return res.body;
  } finally {
    await app.close();
  }
}
