/**
 * The bare-query figure for PostgreSQL: the service's own `get` and `list` statements through the same driver
 * and pool (newPool, DATABASE_POOL_SIZE connections), from `connections` concurrent loops, with no HTTP.
 * What the service reaches on PostgreSQL is compared with this. Prints {get, list} in queries/s, and
 * {getCpuMicros, listCpuMicros}: this process's CPU per query, the driver's share of a request's cost.
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
// The statements the service runs for getPet and listPets (pages written as JSON by PostgreSQL).
const QUERIES = {
  get: () => pool.query(PET_READS.jsonById(BigInt(1 + Math.floor(Math.random() * spec.size)))),
  list: () => pool.query(PET_READS.jsonPage(0n, 20)),
};

const perSecond: Record<string, number> = {};
/** This process's CPU (user + system) per query, in µs: the driver's and the pool's own cost. */
const cpuMicrosPerQuery: Record<string, number> = {};
for (const [name, query] of Object.entries(QUERIES)) {
  const until = Date.now() + spec.seconds * 1000;
  const cpuBefore = process.cpuUsage();
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
  const cpu = process.cpuUsage(cpuBefore);
  cpuMicrosPerQuery[`${name}CpuMicros`] = Math.round(((cpu.user + cpu.system) / Math.max(1, done)) * 10) / 10;
}
await pool.end();
process.stdout.write(JSON.stringify({ ...perSecond, ...cpuMicrosPerQuery }));
