import { createHash } from 'node:crypto';
import type { Pet } from '../domain/pet.js';
import type { ApiKeyRecord, Storage } from './storage.js';

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
 * transaction on the target. Ids and key hashes are kept. Safe to run again: what the target holds
 * already is skipped (only a key's revocation is carried over), so a run that stopped half way, or a
 * second run after the source took more writes, finishes the job.
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

/** How many rows a table holds, and a SHA-256 over all of them in id order. */
export interface TableDigest {
  count: number;
  sha256: string;
}

export interface DataDigest {
  apiKeys: TableDigest;
  pets: TableDigest;
}

/**
 * Digests every pet and key, field by field, computed here rather than in SQL so that two different
 * databases are compared by one and the same code. Equal digests mean equal contents.
 */
export async function digestData(storage: Storage, batchSize: number): Promise<DataDigest> {
  const keys = createHash('sha256');
  const keyRecords = [...(await storage.apiKeys.list())].sort((a, b) => (a.id < b.id ? -1 : 1));
  for (const key of keyRecords) keys.update(`${JSON.stringify(keyFields(key))}\n`);

  const pets = createHash('sha256');
  let count = 0;
  for await (const batch of petBatches(storage, batchSize)) {
    for (const pet of batch) {
      pets.update(`${JSON.stringify([String(pet.id), pet.name, String(pet.categoryId), pet.status])}\n`);
    }
    count += batch.length;
  }

  return {
    apiKeys: { count: keyRecords.length, sha256: keys.digest('hex') },
    pets: { count, sha256: pets.digest('hex') },
  };
}

const keyFields = (key: ApiKeyRecord) => [
  key.id,
  key.name,
  key.hash,
  key.hint,
  key.createdAt.toISOString(),
  key.revokedAt?.toISOString() ?? null,
];
