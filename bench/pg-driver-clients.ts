/**
 * The service's PostgreSQL statements through each driver the driver comparison measures
 * (bench/pg-drivers.ts), and through the service's own pool for the bare-query figure (bench/pg-bare.ts):
 *
 * - `pg`: the service's pool as it is (newPool: its pool size, timeouts, int8 parsed to bigint), the
 *   statements named as the service names them (prepared once per connection).
 * - `pg-native`: the same pool configuration on `pg.native` (libpq through pg-native). libpq takes no
 *   statement_timeout from pg's config (pg passes only the connection string's keys to it): the service's
 *   session timeouts go in the `options` startup parameter instead. pg-native is loaded from
 *   bench/.drivers (NODE_PATH), never from the project's dependencies.
 * - `postgres` (postgres.js): the same pool size, session timeouts and application_name as startup
 *   parameters, int8 as bigint (postgres.BigInt), each statement's text prepared per connection
 *   (`prepare: true`; postgres.js names them itself).
 *
 * Each driver runs the same three operations: `get` (PET_READS.jsonById, a random id), `list`
 * (PET_READS.jsonPage, the first page of 20) and `create`: the transaction the service's create runs for a
 * pet without an Idempotency-Key (PostgresPetStore#createAll for one pet): BEGIN, the pets INSERT …
 * RETURNING id, the event order lock, the event row (appendEvents), COMMIT, each awaited in turn.
 */
import { createRequire } from 'node:module';
import type pg from 'pg';
import postgres from 'postgres';
import { petCreated } from '../src/domain/events.js';
import type { PetRecordInput } from '../src/domain/storage.js';
import { appendEvents, EVENT_ORDER_LOCK, EVENT_WRITES } from '../src/storage/postgres/events.js';
import { PET_INSERT, PET_READS } from '../src/storage/postgres/pets.js';
import { newPool } from '../src/storage/postgres/postgres-storage.js';
import { inTransaction } from '../src/storage/postgres/transaction.js';

export const DRIVERS = ['pg', 'pg-native', 'postgres'] as const;
export type DriverName = (typeof DRIVERS)[number];
export const OPERATIONS = ['get', 'list', 'create'] as const;
export type Operation = (typeof OPERATIONS)[number];

export interface DriverSpec {
  url: string;
  poolSize: number;
  /** The pets seeded (ids 1…size): get asks for one at random. */
  size: number;
  /** DATABASE_TIMEOUT_MS: the statement, lock and connection bound (the service's default is 5 s). */
  timeoutMs: number;
}

export interface DriverClient {
  readonly name: DriverName;
  run(operation: Operation): Promise<unknown>;
  /** SELECT 1, not prepared: opens a connection. */
  ping(): Promise<unknown>;
  end(): Promise<void>;
}

/** The pet every create inserts: one row, as a create without an Idempotency-Key. */
const PET: PetRecordInput = { name: 'bench', categoryId: 1n, status: 'available' };

const randomId = (size: number) => BigInt(1 + Math.floor(Math.random() * size));

/** get, list and create through a node-postgres pool (pure JS or native): the service's own code path. */
function nodePostgres(name: DriverName, pool: pg.Pool, size: number): DriverClient {
  pool.on('error', () => undefined);
  const create = () =>
    inTransaction(pool, async (client) => {
      const { rows } = await client.query<{ id: bigint }>({
        ...PET_INSERT,
        values: [[PET.name], [PET.categoryId], [PET.status]],
      });
      const id = (rows[0] as { id: bigint }).id;
      await appendEvents(client, [petCreated({ id, ...PET }, new Date())]);
      return id;
    });
  const operations: Record<Operation, () => Promise<unknown>> = {
    get: () => pool.query(PET_READS.jsonById(randomId(size))),
    list: () => pool.query(PET_READS.jsonPage(0n, 20)),
    create,
  };
  return {
    name,
    run: (operation) => operations[operation](),
    ping: () => pool.query('SELECT 1'),
    end: () => pool.end(),
  };
}

/** The session settings newPool gives its connections, as a libpq `options` startup parameter. */
const sessionOptions = (timeoutMs: number) =>
  `-c statement_timeout=${timeoutMs} -c lock_timeout=${timeoutMs} -c idle_in_transaction_session_timeout=${timeoutMs * 2}`;

/** pg.native, with pg-native resolved through NODE_PATH (bench/.drivers/node_modules). */
function nativePg(): typeof pg {
  // pg's `native` getter requires pg-native from pg's own folder, which falls back to NODE_PATH.
  const loaded = createRequire(import.meta.url)('pg') as typeof pg;
  if (!loaded.native) throw new Error('pg.native is not available (pg-native not found on NODE_PATH)');
  return loaded.native;
}

function postgresJs({ url, poolSize, size, timeoutMs }: DriverSpec): DriverClient {
  const sql = postgres(url, {
    max: poolSize,
    // int8 as bigint, as the service's pool parses it (postgres.js returns strings by default).
    types: { bigint: postgres.BigInt },
    connect_timeout: Math.ceil(timeoutMs / 1000),
    connection: {
      application_name: 'petstore',
      statement_timeout: timeoutMs,
      lock_timeout: timeoutMs,
      idle_in_transaction_session_timeout: timeoutMs * 2,
    },
    onnotice: () => undefined,
    // fetch_types stays on (the default): sql.array of bigint or timestamptz needs the array types it
    // fetches once a connection (without them a bigint[] parameter is sent as a bigint).
  });
  const prepared = { prepare: true } as const;
  const run = (query: { text: string; values?: readonly unknown[] }) =>
    sql.unsafe(query.text, (query.values ?? []) as postgres.ParameterOrJSON<never>[], prepared);
  const create = () =>
    sql.begin(async (tx) => {
      const [row] = await tx.unsafe<{ id: bigint }[]>(
        PET_INSERT.text,
        [tx.array([PET.name]), tx.array([PET.categoryId]), tx.array([PET.status])],
        prepared,
      );
      const event = petCreated({ id: (row as { id: bigint }).id, ...PET }, new Date());
      await tx.unsafe(
        EVENT_WRITES.append.text,
        [
          tx.array([event.type]),
          tx.array([event.occurredAt]),
          tx.array([event.data]),
          tx.array([event.cause ?? null]),
          EVENT_ORDER_LOCK as never,
        ],
        prepared,
      );
      return (row as { id: bigint }).id;
    });
  const operations: Record<Operation, () => Promise<unknown>> = {
    get: () => run(PET_READS.jsonById(randomId(size))),
    list: () => run(PET_READS.jsonPage(0n, 20)),
    create,
  };
  return {
    name: 'postgres',
    run: (operation) => operations[operation](),
    ping: () => sql.unsafe('SELECT 1'),
    end: () => sql.end({ timeout: 5 }),
  };
}

/** What `connections` loops did, running one operation back to back: how many, for how long, this process's CPU. */
export interface Turn {
  queries: number;
  seconds: number;
  cpuMicros: number;
}

/** Runs `run` from `connections` concurrent loops, each starting the next as one ends, for `seconds`. */
export async function drive(
  run: () => Promise<unknown>,
  connections: number,
  seconds: number,
): Promise<Turn> {
  const started = Date.now();
  const until = started + seconds * 1000;
  const cpuBefore = process.cpuUsage();
  let queries = 0;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (Date.now() < until) {
        await run();
        queries++;
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  return { queries, seconds: (Date.now() - started) / 1000, cpuMicros: cpu.user + cpu.system };
}

export function openDriver(name: DriverName, spec: DriverSpec): DriverClient {
  const options = { poolSize: spec.poolSize, timeoutMs: spec.timeoutMs };
  if (name === 'pg') return nodePostgres(name, newPool(spec.url, options), spec.size);
  if (name === 'pg-native') {
    // The service's pool configuration, exactly (pool.options), on the native client.
    const template = newPool(spec.url, options);
    const Native = nativePg();
    const pool = new Native.Pool({ ...template.options, options: sessionOptions(spec.timeoutMs) });
    void template.end();
    return nodePostgres(name, pool, spec.size);
  }
  return postgresJs(spec);
}
