import type pg from 'pg';
import {
  ORDERABLE_PET_STATUS,
  type Order,
  type OrderSettlement,
  type OrderStatus,
  PET_STATUS_BY_ORDER,
} from '../../domain/order.js';
import type { PetStatus } from '../../domain/pet.js';
import type {
  OrderListQuery,
  OrderPlacement,
  OrderRecordInput,
  OrderStore,
  PlacedOrder,
  SettledOrder,
} from '../../domain/storage.js';
import { countRows } from './count.js';
import type { PostgresIdempotencyKeys } from './idempotency.js';
import { inTransaction } from './transaction.js';

const ORDER_COLUMNS = 'id, pet_id, status, placed_at';

/** An orders row as node-postgres returns it: int8 as bigint (postgres-storage.ts), timestamptz as Date. */
interface OrderRow {
  id: bigint;
  pet_id: bigint;
  status: OrderStatus;
  placed_at: Date;
}

const toOrder = (row: OrderRow): Order => ({
  id: row.id,
  petId: row.pet_id,
  status: row.status,
  placedAt: row.placed_at,
});

/**
 * The statements every order operation runs, named: each pooled connection has PostgreSQL parse and
 * plan them once (as for pets).
 */
const ORDER_SQL = {
  /** The animal moves only from available; under READ COMMITTED a racing UPDATE waits for this one's
   * transaction, then re-reads the row and finds it no longer available: exactly one wins. */
  takePet: (petId: bigint): pg.QueryConfig<[bigint]> => ({
    name: 'order_take_pet',
    text: `UPDATE pets SET status = '${PET_STATUS_BY_ORDER.placed}' WHERE id = $1 AND status = '${ORDERABLE_PET_STATUS}'`,
    values: [petId],
  }),
  petStatus: (petId: bigint): pg.QueryConfig<[bigint]> => ({
    name: 'order_pet_status',
    text: 'SELECT status FROM pets WHERE id = $1',
    values: [petId],
  }),
  insert: (petId: bigint, at: Date): pg.QueryConfig<[bigint, Date]> => ({
    name: 'order_insert',
    text: "INSERT INTO orders (pet_id, status, placed_at) VALUES ($1, 'placed', $2) RETURNING id",
    values: [petId, at],
  }),
  /** The order moves only from placed: of a racing deliver and cancel, the second finds it settled. */
  settle: (id: bigint, to: OrderSettlement): pg.QueryConfig<[OrderSettlement, bigint]> => ({
    name: 'order_settle',
    text: `UPDATE orders SET status = $1 WHERE id = $2 AND status = 'placed' RETURNING ${ORDER_COLUMNS}`,
    values: [to, id],
  }),
  movePet: (petId: bigint, to: PetStatus): pg.QueryConfig<[PetStatus, bigint]> => ({
    name: 'order_move_pet',
    text: `UPDATE pets SET status = $1 WHERE id = $2 AND status = '${PET_STATUS_BY_ORDER.placed}'`,
    values: [to, petId],
  }),
  byId: (id: bigint): pg.QueryConfig<[bigint]> => ({
    name: 'order_by_id',
    text: `SELECT ${ORDER_COLUMNS} FROM orders WHERE id = $1`,
    values: [id],
  }),
};

/** The page query for these filters: one named statement per combination. */
function pageQuery({ afterId, status, petId, limit }: OrderListQuery): pg.QueryConfig<unknown[]> {
  const filters: [string, unknown][] = [];
  if (status !== undefined) filters.push(['status', status]);
  if (petId !== undefined) filters.push(['pet_id', petId]);
  const where = filters.map(([column], i) => `${column} = $${i + 1}`);
  const n = filters.length;
  return {
    name: `orders_page${filters.map(([column]) => `_${column}`).join('')}`,
    text: `SELECT ${ORDER_COLUMNS} FROM orders WHERE ${[...where, `id > $${n + 1}`].join(' AND ')} ORDER BY id LIMIT $${n + 2}`,
    values: [...filters.map(([, value]) => value), afterId, limit],
  };
}

/** Thrown inside a placement's transaction to roll it back (a claimed key included) when it is refused. */
class Refusal {
  constructor(readonly outcome: PlacedOrder) {}
}

/**
 * Orders on PostgreSQL, for any number of nodes. Each write is one READ COMMITTED transaction of
 * conditional UPDATEs: a row changes only from the state the move starts from, and a racing
 * transaction waits on the row's lock, then re-reads it and finds it moved. The partial unique index
 * (one placed order per animal) refuses a second placed order whatever the code does. Locks are taken
 * in one order (placing: the key's record, then the animal; settling: the order, then its animal), so
 * no two writes wait on each other.
 *
 * Not group-committed, unlike creates: PostgreSQL already flushes the write-ahead log once for the
 * commits that arrive together, and one transaction per request keeps a write waiting on an animal's
 * lock from holding up others.
 */
export class PostgresOrderStore implements OrderStore {
  readonly #pool: pg.Pool;
  readonly #idempotency: PostgresIdempotencyKeys;
  /** Writes under way, for settled(). */
  readonly #inFlight = new Set<Promise<unknown>>();

  constructor(pool: pg.Pool, idempotency: PostgresIdempotencyKeys) {
    this.#pool = pool;
    this.#idempotency = idempotency;
  }

  #track<T>(write: Promise<T>): Promise<T> {
    this.#inFlight.add(write);
    const done = () => this.#inFlight.delete(write);
    write.then(done, done);
    return write;
  }

  place(placement: OrderPlacement): Promise<PlacedOrder> {
    return this.#track(
      inTransaction(this.#pool, (client) => this.#placeIn(client, placement)).catch((error: unknown) => {
        if (error instanceof Refusal) return error.outcome;
        throw error;
      }),
    );
  }

  async #placeIn(client: pg.PoolClient, { petId, at, idempotency }: OrderPlacement): Promise<PlacedOrder> {
    if (idempotency && !(await this.#idempotency.claim(client, idempotency))) {
      const { requestHash, id } = await this.#idempotency.recorded(client, idempotency);
      const { rows } = await client.query<OrderRow>(ORDER_SQL.byId(id));
      return { outcome: 'replayed', order: toOrder(rows[0] as OrderRow), requestHash };
    }
    if ((await client.query(ORDER_SQL.takePet(petId))).rowCount === 0) {
      const { rows } = await client.query<{ status: PetStatus }>(ORDER_SQL.petStatus(petId));
      const petStatus = rows[0]?.status;
      throw new Refusal(
        petStatus === undefined ? { outcome: 'unknown_pet' } : { outcome: 'pet_not_available', petStatus },
      );
    }
    const { rows } = await client.query<{ id: bigint }>(ORDER_SQL.insert(petId, at));
    const id = (rows[0] as { id: bigint }).id;
    if (idempotency) await this.#idempotency.attach(client, idempotency, id);
    return { outcome: 'placed', order: { id, petId, status: 'placed', placedAt: at } };
  }

  settle(id: bigint, to: OrderSettlement): Promise<SettledOrder> {
    return this.#track(
      inTransaction(this.#pool, async (client): Promise<SettledOrder> => {
        const { rows } = await client.query<OrderRow>(ORDER_SQL.settle(id, to));
        const settled = rows[0];
        if (!settled) {
          const found = (await client.query<OrderRow>(ORDER_SQL.byId(id))).rows[0];
          if (!found) return { outcome: 'unknown_order' };
          const order = toOrder(found);
          return { outcome: order.status === to ? 'unchanged' : 'conflict', order };
        }
        const order = toOrder(settled);
        // Never one without the other: an animal not pending under a placed order rolls it all back.
        if ((await client.query(ORDER_SQL.movePet(order.petId, PET_STATUS_BY_ORDER[to]))).rowCount !== 1) {
          throw new Error(`order ${id} was placed but its animal ${order.petId} is not pending`);
        }
        return { outcome: 'settled', order };
      }),
    );
  }

  async settled(): Promise<void> {
    await Promise.allSettled([...this.#inFlight]);
  }

  async findById(id: bigint): Promise<Order | undefined> {
    const { rows } = await this.#pool.query<OrderRow>(ORDER_SQL.byId(id));
    return rows[0] && toOrder(rows[0]);
  }

  async list(query: OrderListQuery): Promise<Order[]> {
    const { rows } = await this.#pool.query<OrderRow>(pageQuery(query));
    return rows.map(toOrder);
  }

  async count(): Promise<number> {
    return countRows(this.#pool, 'orders');
  }

  async createMany(orders: readonly OrderRecordInput[]): Promise<Order[]> {
    if (orders.length === 0) return [];
    return inTransaction(this.#pool, async (client) => {
      await client.query(
        `UPDATE pets SET status = v.status
         FROM unnest($1::bigint[], $2::text[]) AS v(id, status) WHERE pets.id = v.id`,
        [orders.map((o) => o.petId), orders.map((o) => PET_STATUS_BY_ORDER[o.status])],
      );
      // WITH ORDINALITY + ORDER BY: ids are drawn, and reported, in the order given (as for pets).
      const { rows } = await client.query<{ id: bigint }>(
        `INSERT INTO orders (pet_id, status, placed_at)
         SELECT pet_id, status, placed_at
         FROM unnest($1::bigint[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS o(pet_id, status, placed_at, n)
         ORDER BY n
         RETURNING id`,
        [orders.map((o) => o.petId), orders.map((o) => o.status), orders.map((o) => o.placedAt)],
      );
      return rows.map((row, i) => ({ id: row.id, ...(orders[i] as OrderRecordInput) }));
    });
  }

  async importBatch(orders: readonly Order[]): Promise<number> {
    if (orders.length === 0) return 0;
    return inTransaction(this.#pool, async (client) => {
      // Placements wait until this commits: no id can be handed out while the sequence is moved below.
      await client.query('LOCK TABLE orders IN SHARE ROW EXCLUSIVE MODE');
      // An order whose animal is absent is left out, as is one whose id is taken or that would give its
      // animal a second placed order (DO NOTHING without a target covers every unique index); rows go in
      // in the order given, so of two placed orders for one animal the first is kept.
      const { rowCount } = await client.query(
        `INSERT INTO orders (${ORDER_COLUMNS})
         SELECT o.id, o.pet_id, o.status, o.placed_at
         FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[])
           WITH ORDINALITY AS o(id, pet_id, status, placed_at, n)
         WHERE EXISTS (SELECT 1 FROM pets WHERE pets.id = o.pet_id)
         ORDER BY o.n
         ON CONFLICT DO NOTHING`,
        [
          orders.map((o) => o.id),
          orders.map((o) => o.petId),
          orders.map((o) => o.status),
          orders.map((o) => o.placedAt),
        ],
      );
      await client.query(
        `SELECT setval(seq, greatest((SELECT max(id) FROM orders), nextval(seq)))
         FROM CAST(pg_get_serial_sequence('orders', 'id') AS regclass) AS seq`,
      );
      return rowCount ?? 0;
    });
  }
}
