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

/**
 * The same storage with some of its stores replaced (one counting or slowing its calls, say): the
 * others, and its methods, go to `storage` itself, which a spread would lose (they live on its class).
 */
export const withStores = (
  storage: Storage,
  replaced: Partial<
    Pick<
      Storage,
      'pets' | 'orders' | 'apiKeys' | 'idempotency' | 'events' | 'webhookEndpoints' | 'deliveries'
    >
  >,
): Storage => ({
  pets: storage.pets,
  orders: storage.orders,
  apiKeys: storage.apiKeys,
  idempotency: storage.idempotency,
  events: storage.events,
  webhookEndpoints: storage.webhookEndpoints,
  deliveries: storage.deliveries,
  schema: storage.schema,
  sharedSecret: (name) => storage.sharedSecret(name),
  ping: () => storage.ping(),
  analyze: () => storage.analyze(),
  close: () => storage.close(),
  ...replaced,
});
