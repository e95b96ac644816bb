import type { StoredEvent } from '../domain/events.js';
import type { Order } from '../domain/order.js';
import type { Pet } from '../domain/pet.js';
import type { ApiKeyRecord, Storage } from '../domain/storage.js';
import type { WebhookEndpoint } from '../domain/webhooks.js';

export interface CopyProgress {
  what: 'api keys' | 'pets' | 'orders' | 'webhook endpoints' | 'events';
  /** Rows read from the source so far, of `total`. */
  read: number;
  total: number;
  /** Rows the target took (inserted, or a key's revocation); the rest were there already, or left out. */
  written: number;
  /** Orders not copied because their animal differs between the two sides. */
  leftOut?: number;
}

export interface CopyOptions {
  /** Rows per read and per target transaction. */
  batchSize: number;
  onProgress?: (progress: CopyProgress) => void;
}

/**
 * Copies every API key, pet and order from one storage into another, batch by batch, each batch one
 * transaction on the target. Ids and key hashes are kept. Safe to run again: a row whose id the target
 * holds already is never overwritten (only a key's revocation is carried over), so a run that stopped
 * half way, or a second run after the source took more writes, copies exactly what is missing. An
 * order is copied only when its animal is the same on both sides, status included: an order for an
 * animal that differs (another animal under that id, or one whose orders moved on one side only) would
 * leave the target's order and animal disagreeing, so it is left for the comparison to report.
 */
export async function copyData(from: Storage, to: Storage, options: CopyOptions): Promise<void> {
  const { batchSize, onProgress = () => undefined } = options;

  const keys = await from.apiKeys.list();
  const keyProgress: CopyProgress = { what: 'api keys', read: 0, total: keys.length, written: 0 };
  for (let start = 0; start < keys.length; start += batchSize) {
    const batch = keys.slice(start, start + batchSize);
    keyProgress.written += await to.apiKeys.importBatch(batch);
    keyProgress.read += batch.length;
    onProgress({ ...keyProgress });
  }

  const petProgress: CopyProgress = { what: 'pets', read: 0, total: await from.pets.count(), written: 0 };
  for await (const batch of petBatches(from, batchSize)) {
    petProgress.written += await to.pets.importBatch(batch);
    petProgress.read += batch.length;
    onProgress({ ...petProgress });
  }

  const differing = await differingPets(from, to, batchSize);
  const orderProgress: CopyProgress = {
    what: 'orders',
    read: 0,
    total: await from.orders.count(),
    written: 0,
    leftOut: 0,
  };
  for await (const batch of orderBatches(from, batchSize)) {
    const copyable = batch.filter((order) => !differing.has(order.petId));
    orderProgress.written += await to.orders.importBatch(copyable);
    orderProgress.leftOut = (orderProgress.leftOut ?? 0) + batch.length - copyable.length;
    orderProgress.read += batch.length;
    onProgress({ ...orderProgress });
  }

  // Endpoints with their secrets (and a rotation's previous one), so receivers verify as before; then
  // the event log, ids kept. Deliveries are not copied: they belong to the nodes of the source.
  const endpointProgress: CopyProgress = {
    what: 'webhook endpoints',
    read: 0,
    total: await from.webhookEndpoints.count(),
    written: 0,
  };
  for await (const batch of keysetBatches<WebhookEndpoint>((afterId) =>
    from.webhookEndpoints.listEndpoints(afterId, batchSize),
  )) {
    endpointProgress.written += await to.webhookEndpoints.importEndpoints(batch);
    endpointProgress.read += batch.length;
    onProgress({ ...endpointProgress });
  }
  const eventProgress: CopyProgress = {
    what: 'events',
    read: 0,
    total: await from.events.count(),
    written: 0,
  };
  for await (const batch of keysetBatches<StoredEvent>((afterId) =>
    from.events.list({ afterId, types: [], limit: batchSize }),
  )) {
    eventProgress.written += await to.events.importBatch(batch);
    eventProgress.read += batch.length;
    onProgress({ ...eventProgress });
  }
  await to.analyze();
}

/** Every row of a keyset-paged list in id order, a page at a time. */
async function* keysetBatches<T extends { id: bigint }>(
  page: (afterId: bigint) => Promise<T[]>,
): AsyncGenerator<T[]> {
  for (let afterId = 0n; ; ) {
    const batch = await page(afterId);
    if (batch.length === 0) return;
    yield batch;
    afterId = (batch[batch.length - 1] as T).id;
  }
}

/** The ids of the pets both sides hold, but not alike (name, categoryId, status). */
async function differingPets(from: Storage, to: Storage, batchSize: number): Promise<Set<bigint>> {
  const differing = new Set<bigint>();
  for await (const [a, b] of pairs(eachPet(from, batchSize), eachPet(to, batchSize))) {
    if (a && b && !samePet(a, b)) differing.add(a.id);
  }
  return differing;
}

/** Every order in id order, a keyset page at a time. */
export function orderBatches(storage: Storage, batchSize: number): AsyncGenerator<Order[]> {
  return keysetBatches((afterId) => storage.orders.list({ afterId, limit: batchSize }));
}

/**
 * Two id-ordered walks side by side: each id once, with its row on either side (undefined where that
 * side has none). Memory stays flat however many rows there are.
 */
async function* pairs<T extends { id: bigint }>(
  source: AsyncGenerator<T>,
  target: AsyncGenerator<T>,
): AsyncGenerator<[T | undefined, T | undefined]> {
  let a = await source.next();
  let b = await target.next();
  while (!a.done || !b.done) {
    if (b.done || (!a.done && a.value.id < b.value.id)) {
      yield [a.value as T, undefined];
      a = await source.next();
    } else if (a.done || b.value.id < a.value.id) {
      yield [undefined, b.value];
      b = await target.next();
    } else {
      yield [a.value, b.value];
      a = await source.next();
      b = await target.next();
    }
  }
}

/** Every pet in id order, a keyset page at a time: memory stays flat however many there are. */
export function petBatches(storage: Storage, batchSize: number): AsyncGenerator<Pet[]> {
  return keysetBatches((afterId) => storage.pets.list({ afterId, limit: batchSize }));
}

/** A row held under one id by both sides, differently: never overwritten, only reported. */
export interface Conflict<T> {
  source: T;
  target: T;
}
export type PetConflict = Conflict<Pet>;
export type OrderConflict = Conflict<Order>;

/** How the source's rows stand in the target, after a copy. */
export interface TableComparison {
  /** Rows in the source. */
  source: number;
  /** Source rows the target holds as they are. */
  inTarget: number;
  /** Source rows absent from the target (they arrived in the source during the copy). */
  missing: number;
  /** Rows only the target holds: written there after the switch; kept. */
  onlyInTarget: number;
  /** Ids both sides hold with different contents. */
  conflicts: number;
}

export interface DataComparison {
  apiKeys: TableComparison;
  pets: TableComparison;
  orders: TableComparison;
  /** The first `maxListed` conflicting pets, in id order. */
  petConflicts: PetConflict[];
  /** The first `maxListed` conflicting orders, in id order. */
  orderConflicts: OrderConflict[];
  /** The first `maxListed` source orders the target lacks, in id order. */
  missingOrders: Order[];
}

/**
 * Compares the target with the source row by row, every field of every pet, order and key (by the same
 * code for two different databases): pets and orders by walking both sides in id order at once, so
 * memory stays flat. What the target did after the switch is no difference: an order it placed, or
 * delivered or cancelled after the copy, and the animal status that order gave.
 */
export async function compareData(
  from: Storage,
  to: Storage,
  options: { batchSize: number; maxListed: number },
): Promise<DataComparison> {
  // Orders first: they tell which animals moved on in the target after the copy.
  const orders = emptyComparison();
  const orderConflicts: OrderConflict[] = [];
  const missingOrders: Order[] = [];
  const movedInTarget = new Set<bigint>();
  for await (const [a, b] of pairs(eachOrder(from, options.batchSize), eachOrder(to, options.batchSize))) {
    if (!b) {
      orders.source++;
      if (++orders.missing <= options.maxListed) missingOrders.push(a as Order);
    } else if (!a) {
      orders.onlyInTarget++;
      movedInTarget.add(b.petId);
    } else {
      orders.source++;
      if (!sameOrder(a, b)) {
        if (++orders.conflicts <= options.maxListed) orderConflicts.push({ source: a, target: b });
      } else {
        orders.inTarget++;
        if (a.status !== b.status) movedInTarget.add(b.petId);
      }
    }
  }

  const pets = emptyComparison();
  const petConflicts: PetConflict[] = [];
  for await (const [a, b] of pairs(eachPet(from, options.batchSize), eachPet(to, options.batchSize))) {
    if (!b) {
      pets.source++;
      pets.missing++;
    } else if (!a) {
      pets.onlyInTarget++;
    } else {
      pets.source++;
      const alike = samePet(a, b) || (movedInTarget.has(a.id) && sameAnimal(a, b));
      if (alike) pets.inTarget++;
      else if (++pets.conflicts <= options.maxListed) petConflicts.push({ source: a, target: b });
    }
  }

  const apiKeys = emptyComparison();
  const targetKeys = new Map((await to.apiKeys.list()).map((key) => [key.id, key]));
  for (const key of await from.apiKeys.list()) {
    apiKeys.source++;
    const copy = targetKeys.get(key.id);
    targetKeys.delete(key.id);
    if (!copy) apiKeys.missing++;
    else if (sameKey(key, copy)) apiKeys.inTarget++;
    else apiKeys.conflicts++;
  }
  apiKeys.onlyInTarget = targetKeys.size;
  return { apiKeys, pets, orders, petConflicts, orderConflicts, missingOrders };
}

const emptyComparison = (): TableComparison => ({
  source: 0,
  inTarget: 0,
  missing: 0,
  onlyInTarget: 0,
  conflicts: 0,
});

async function* eachPet(storage: Storage, batchSize: number): AsyncGenerator<Pet> {
  for await (const batch of petBatches(storage, batchSize)) yield* batch;
}

async function* eachOrder(storage: Storage, batchSize: number): AsyncGenerator<Order> {
  for await (const batch of orderBatches(storage, batchSize)) yield* batch;
}

/** The same animal (its name and category never change), whatever its status. */
const sameAnimal = (a: Pet, b: Pet) => a.name === b.name && a.categoryId === b.categoryId;
const samePet = (a: Pet, b: Pet) => sameAnimal(a, b) && a.status === b.status;

/**
 * The same order, though the target may have delivered or cancelled it since the switch (an order only
 * moves on from placed, so that is the target's own doing, not a difference).
 */
const sameOrder = (a: Order, b: Order) =>
  a.petId === b.petId &&
  a.placedAt.getTime() === b.placedAt.getTime() &&
  (a.status === b.status || a.status === 'placed');

/** The same key, though the target may have revoked it since the switch (a revocation only spreads). */
const sameKey = (a: ApiKeyRecord, b: ApiKeyRecord) =>
  a.name === b.name &&
  a.hash === b.hash &&
  a.hint === b.hint &&
  a.createdAt.getTime() === b.createdAt.getTime() &&
  a.scopes.join(' ') === b.scopes.join(' ') &&
  a.expiresAt?.getTime() === b.expiresAt?.getTime() &&
  (a.revokedAt === undefined || b.revokedAt !== undefined);
