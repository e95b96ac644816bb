import { randomBytes } from 'node:crypto';
import type pg from 'pg';

/** Random secrets shared by every node on the database, created on first use. */
export class PostgresSecrets {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async get(name: string): Promise<Buffer> {
    // Insert-if-absent then read: when nodes race, the first commit wins and every node reads its value.
    await this.#pool.query(
      'INSERT INTO shared_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING',
      [name, randomBytes(32)],
    );
    const { rows } = await this.#pool.query<{ value: Buffer }>(
      'SELECT value FROM shared_secrets WHERE name = $1',
      [name],
    );
    return (rows[0] as { value: Buffer }).value;
  }
}
