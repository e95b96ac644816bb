/**
 * The bare-query figure for PostgreSQL: the service's own `get` and `list` statements, and the
 * transaction its `create` runs, through the same driver and pool (newPool, DATABASE_POOL_SIZE
 * connections; bench/pg-driver-clients.ts), from `connections` concurrent loops, with no HTTP. What the
 * service reaches on PostgreSQL is compared with this. Prints {get, list, create} in queries (creates)
 * per second, and {getCpuMicros, listCpuMicros, createCpuMicros}: this process's CPU per query, the
 * driver's share of a request's cost.
 *
 * The creates go to a database of their own, made for them on the same server and dropped after, so the
 * service's database keeps the pets and events it was seeded with.
 *
 *   tsx bench/pg-bare.ts '{"url":"postgres://…","poolSize":10,"connections":32,"seconds":10,"size":10000}'
 */
import { migrate } from '../src/storage/postgres/migrations.js';
import { newPool } from '../src/storage/postgres/postgres-storage.js';
import { createDatabase } from '../support/postgres-admin.js';
import {
  type DriverClient,
  type DriverSpec,
  drive,
  type Operation,
  openDriver,
} from './pg-driver-clients.js';

interface BareSpec {
  url: string;
  poolSize: number;
  connections: number;
  seconds: number;
  size: number;
}

const spec = JSON.parse(process.argv[2] as string) as BareSpec;
const driverSpec: DriverSpec = { url: spec.url, poolSize: spec.poolSize, size: spec.size, timeoutMs: 5_000 };

const writes = await createDatabase(spec.url, 'petstore_bare_create');
const migrations = newPool(writes.url, { poolSize: 1, timeoutMs: 5_000 });
await migrate(migrations);
await migrations.end();

const reads = openDriver('pg', driverSpec);
const creates = openDriver('pg', { ...driverSpec, url: writes.url });

const perSecond: Record<string, number> = {};
/** This process's CPU (user + system) per query, in µs: the driver's and the pool's own cost. */
const cpuMicrosPerQuery: Record<string, number> = {};
try {
  for (const [operation, driver] of [
    ['get', reads],
    ['list', reads],
    ['create', creates],
  ] as [Operation, DriverClient][]) {
    const { queries, cpuMicros } = await drive(() => driver.run(operation), spec.connections, spec.seconds);
    perSecond[operation] = Math.round(queries / spec.seconds);
    cpuMicrosPerQuery[`${operation}CpuMicros`] = Math.round((cpuMicros / Math.max(1, queries)) * 10) / 10;
  }
} finally {
  await reads.end();
  await creates.end();
  await writes.drop();
}
process.stdout.write(JSON.stringify({ ...perSecond, ...cpuMicrosPerQuery }));
