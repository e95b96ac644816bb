import type { Pet } from '../domain/pet.js';
import type { ApiKeyRecord, Storage } from '../domain/storage.js';

export interface CopyProgress {
  what: 'api keys' | 'pets';
  /** Rows read from the source so far, of `total`. */
  read: number;
  total: number;
  /** Rows the target took (inserted, or a key's revocation); the rest were there already. */
  written: number;
}

export interface CopyOptions {
  /** Rows per read and per target transaction. */
  batchSize: number;
  onProgress?: (progress: CopyProgress) => void;
}

/**
 * Copies every API key and pet from one storage into another, batch by batch, each batch one
 * transaction on the target. Ids and key hashes are kept. Safe to run again: a row whose id the target
 * holds already is never overwritten (only a key's revocation is carried over), so a run that stopped
 * half way, or a second run after the source took more writes, copies exactly what is missing.
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
  await to.analyze();
}

/** Every pet in id order, a keyset page at a time: memory stays flat however many there are. */
export async function* petBatches(storage: Storage, batchSize: number): AsyncGenerator<Pet[]> {
  for (let afterId = 0n; ; ) {
    const batch = await storage.pets.list({ afterId, limit: batchSize });
    if (batch.length === 0) return;
    yield batch;
    afterId = (batch[batch.length - 1] as Pet).id;
  }
}

/** A pet held under one id by both sides, differently: never overwritten, only reported. */
export interface PetConflict {
  source: Pet;
  target: Pet;
}

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
  /** The first `maxListed` conflicting pets, in id order. */
  petConflicts: PetConflict[];
}

/**
 * Compares the target with the source row by row, every field of every pet and key (by the same code
 * for two different databases): pets by walking both sides in id order at once, so memory stays flat.
 */
export async function compareData(
  from: Storage,
  to: Storage,
  options: { batchSize: number; maxListed: number },
): Promise<DataComparison> {
  const petConflicts: PetConflict[] = [];
  const pets = emptyComparison();
  const source = eachPet(from, options.batchSize);
  const target = eachPet(to, options.batchSize);
  let a = await source.next();
  let b = await target.next();
  while (!a.done || !b.done) {
    if (b.done || (!a.done && a.value.id < b.value.id)) {
      pets.source++;
      pets.missing++;
      a = await source.next();
    } else if (a.done || b.value.id < a.value.id) {
      pets.onlyInTarget++;
      b = await target.next();
    } else {
      pets.source++;
      if (samePet(a.value, b.value)) pets.inTarget++;
      else if (++pets.conflicts <= options.maxListed) petConflicts.push({ source: a.value, target: b.value });
      a = await source.next();
      b = await target.next();
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
  return { apiKeys, pets, petConflicts };
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

const samePet = (a: Pet, b: Pet) =>
  a.name === b.name && a.categoryId === b.categoryId && a.status === b.status;

/** The same key, though the target may have revoked it since the switch (a revocation only spreads). */
const sameKey = (a: ApiKeyRecord, b: ApiKeyRecord) =>
  a.name === b.name &&
  a.hash === b.hash &&
  a.hint === b.hint &&
  a.createdAt.getTime() === b.createdAt.getTime() &&
  (a.revokedAt === undefined || b.revokedAt !== undefined);
