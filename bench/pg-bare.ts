/**
 * The bare-query figure for PostgreSQL: the service's own `get` and `list` statements through the same driver
 * and pool (newPool, DATABASE_POOL_SIZE connections), from `connections` concurrent loops, with no HTTP.
 * What the service reaches on PostgreSQL is compared with this. Prints {get, list} in queries/s.
 *
 *   tsx bench/pg-bare.ts '{"url":"postgres://…","poolSize":10,"connections":32,"seconds":10,"size":10000}'
 */
import { PET_READS } from '../src/storage/postgres/pets.js';
import { newPool } from '../src/storage/postgres/postgres-storage.js';

interface BareSpec {
  url: string;
  poolSize: number;
  connections: number;
  seconds: number;
  size: number;
}

const spec = JSON.parse(process.argv[2] as string) as BareSpec;
const pool = newPool(spec.url, { poolSize: spec.poolSize, timeoutMs: 5_000 });
const QUERIES = {
  get: () => pool.query(PET_READS.byId(BigInt(1 + Math.floor(Math.random() * spec.size)))),
  list: () => pool.query(PET_READS.page(0n, 21)),
};

const perSecond: Record<string, number> = {};
for (const [name, query] of Object.entries(QUERIES)) {
  const until = Date.now() + spec.seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: spec.connections }, async () => {
      while (Date.now() < until) {
        await query();
        done++;
      }
    }),
  );
  perSecond[name] = Math.round(done / spec.seconds);
}
await pool.end();
process.stdout.write(JSON.stringify(perSecond));
