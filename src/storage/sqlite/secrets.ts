import { randomBytes } from 'node:crypto';
import type Database from 'better-sqlite3';

/** Random secrets shared by every process on the database file, created on first use. */
export class SqliteSecrets {
  readonly #insert: Database.Statement<[string, Buffer]>;
  readonly #get: Database.Statement<[string], Buffer>;

  constructor(db: Database.Database) {
    this.#insert = db.prepare('INSERT OR IGNORE INTO shared_secrets (name, value) VALUES (?, ?)');
    this.#get = db.prepare<[string], Buffer>('SELECT value FROM shared_secrets WHERE name = ?').pluck();
  }

  async get(name: string): Promise<Buffer> {
    // Insert-if-absent then read: the first writer wins, every process reads the same value.
    this.#insert.run(name, randomBytes(32));
    return this.#get.get(name) as Buffer;
  }
}
