import { loadConfig } from '../config/config.js';
import type { Storage } from '../domain/storage.js';
import { openStorage } from '../storage/open-storage.js';

/** Runs a command against the configured database (DATABASE_URL), closing it afterwards. */
export async function withStorage<T>(work: (storage: Storage) => Promise<T>): Promise<T> {
  const storage = await openStorage(loadConfig());
  try {
    return await work(storage);
  } finally {
    await storage.close();
  }
}
