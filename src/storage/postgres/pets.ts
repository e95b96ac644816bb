import type pg from 'pg';
import { petCreated } from '../../domain/events.js';
import type { Pet } from '../../domain/pet.js';
import type {
  CreatedPet,
  PetCreation,
  PetListQuery,
  PetPageJson,
  PetRecordInput,
  PetStore,
} from '../../domain/storage.js';
import { CreateBatcher } from '../create-batcher.js';
import { type PetRow, toPet } from '../pet-row.js';
import { countRows } from './count.js';
import { appendEvents } from './events.js';
import type { PostgresIdempotencyKeys } from './idempotency.js';
import { afterGroupCommit, inTransaction, type ReadPool } from './transaction.js';

const PET_COLUMNS = 'id, name, category_id, status';

/**
 * A pet as the JSON object the API sends: the Pet schema's properties in its order; int64 values as
 * their exact digits; the name escaped by to_json as JSON.stringify escapes it. (json_build_object
 * would put spaces around its colons and commas: not the bytes the schema's serialiser writes.)
 */
const PET_JSON = `'{"id":' || id || ',"name":' || to_json(name)::text || ',"categoryId":' || category_id || ',"status":' || to_json(status)::text || '}'`;

/**
 * One page of at most `limit` pets, written by PostgreSQL as the JSON array the API sends, with the id
 * of its last pet and whether more pets follow (a count of at most limit + 1 index entries): one row of
 * three values to parse instead of a row per pet. `where` uses $1 (and $2) and the limit is the last
 * parameter.
 */
function jsonPageSql(where: string, limit: string): string {
  return `SELECT '[' || coalesce(string_agg(pet, ',' ORDER BY id), '') || ']' AS json, max(id) AS last_id,
      (SELECT count(*) FROM (SELECT 1 FROM pets WHERE ${where} ORDER BY id LIMIT ${limit} + 1) AS following) > ${limit} AS more
    FROM (SELECT id, ${PET_JSON} AS pet FROM pets WHERE ${where} ORDER BY id LIMIT ${limit}) AS page`;
}

/** Selected ids ($1, as text: exact beyond 2^53), an optional status ($2), the keyset position ($3). */
const BY_IDS = 'id = ANY($1::int8[]) AND ($2::text IS NULL OR status = $2) AND id > $3';

/** What a page written as JSON comes back as (int8 parsed to bigint by the pool). */
interface JsonPageRow {
  json: string;
  last_id: bigint | null;
  more: boolean;
}

/**
 * The hot reads as named statements: each pooled connection has PostgreSQL parse and plan them once,
 * then only binds and executes them, instead of parsing and planning every call. (The benchmark's
 * bare-query figure runs these same statements.)
 */
export const PET_READS = {
  byId: (id: bigint): pg.QueryConfig<[bigint]> => ({
    name: 'pet_by_id',
    text: `SELECT ${PET_COLUMNS} FROM pets WHERE id = $1`,
    values: [id],
  }),
  page: (afterId: bigint, limit: number): pg.QueryConfig<[bigint, number]> => ({
    name: 'pets_page',
    text: `SELECT ${PET_COLUMNS} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`,
    values: [afterId, limit],
  }),
  pageByStatus: (
    status: string,
    afterId: bigint,
    limit: number,
  ): pg.QueryConfig<[string, bigint, number]> => ({
    name: 'pets_page_by_status',
    text: `SELECT ${PET_COLUMNS} FROM pets WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3`,
    values: [status, afterId, limit],
  }),
  /** Selected ids, with or without a status: each looked up through the primary key. */
  pageByIds: (
    ids: readonly bigint[],
    status: string | undefined,
    afterId: bigint,
    limit: number,
  ): pg.QueryConfig<[string[], string | null, bigint, number]> => ({
    name: 'pets_page_by_ids',
    text: `SELECT ${PET_COLUMNS} FROM pets WHERE ${BY_IDS} ORDER BY id LIMIT $4`,
    values: [ids.map(String), status ?? null, afterId, limit],
  }),
  jsonPageByIds: (
    ids: readonly bigint[],
    status: string | undefined,
    afterId: bigint,
    limit: number,
  ): pg.QueryConfig<[string[], string | null, bigint, number]> => ({
    name: 'pets_page_by_ids_json',
    text: jsonPageSql(BY_IDS, '$4'),
    values: [ids.map(String), status ?? null, afterId, limit],
  }),
  jsonById: (id: bigint): pg.QueryConfig<[bigint]> => ({
    name: 'pet_json_by_id',
    text: `SELECT ${PET_JSON} AS json FROM pets WHERE id = $1`,
    values: [id],
  }),
  jsonPage: (afterId: bigint, limit: number): pg.QueryConfig<[bigint, number]> => ({
    name: 'pets_page_json',
    text: jsonPageSql('id > $1', '$2'),
    values: [afterId, limit],
  }),
  jsonPageByStatus: (
    status: string,
    afterId: bigint,
    limit: number,
  ): pg.QueryConfig<[string, bigint, number]> => ({
    name: 'pets_page_by_status_json',
    text: jsonPageSql('status = $1 AND id > $2', '$3'),
    values: [status, afterId, limit],
  }),
};

/**
 * The one pet INSERT: every create, with or without an Idempotency-Key, and every seeded pet. One
 * statement for any number of pets; WITH ORDINALITY + ORDER BY fixes the insertion order, which is the
 * order the ids are drawn from the sequence and the order RETURNING reports them in.
 */
export const PET_INSERT = {
  name: 'pets_insert', // one text whatever the batch size, so it too is prepared once per connection
  text: `INSERT INTO pets (name, category_id, status)
     SELECT name, category_id, status
     FROM unnest($1::text[], $2::bigint[], $3::text[]) WITH ORDINALITY AS p(name, category_id, status, n)
     ORDER BY n
     RETURNING id`,
} as const;

async function insertPets(db: pg.Pool | pg.PoolClient, pets: readonly PetRecordInput[]): Promise<Pet[]> {
  if (pets.length === 0) return [];
  const { rows } = await db.query<{ id: bigint }>({
    ...PET_INSERT,
    values: [pets.map((p) => p.name), pets.map((p) => p.categoryId), pets.map((p) => p.status)],
  });
  return rows.map((row, i) => ({ id: row.id, ...(pets[i] as PetRecordInput) }));
}

/** Orders claims by (API key, key): batches on several nodes then take the rows' locks in one order. */
const byClaim = (a: PetCreation, b: PetCreation): number => {
  const [x, y] = [a.idempotency, b.idempotency];
  if (!x || !y) return 0;
  return x.apiKeyHash < y.apiKeyHash
    ? -1
    : x.apiKeyHash > y.apiKeyHash
      ? 1
      : x.key < y.key
        ? -1
        : x.key > y.key
          ? 1
          : 0;
};

/** Pets on PostgreSQL. int8 columns are parsed to bigint by the pool (postgres-storage.ts). */
export class PostgresPetStore implements PetStore {
  readonly #pool: pg.Pool;
  /** Where the API's reads go: the pool, or the replicas' router (replicas.ts). */
  readonly #reads: ReadPool;
  /** createPet's Idempotency-Key records. */
  readonly #idempotency: PostgresIdempotencyKeys;
  // One batch in flight at a time; creates arriving meanwhile go together in the next one.
  readonly #creates: CreateBatcher<PetCreation, CreatedPet>;

  constructor(pool: pg.Pool, idempotency: PostgresIdempotencyKeys, reads: ReadPool = pool) {
    this.#pool = pool;
    this.#reads = reads;
    this.#idempotency = idempotency;
    this.#creates = new CreateBatcher((creations) => this.#createAll(creations), {
      name: 'pets.create',
      afterCommit: afterGroupCommit(pool),
    });
  }

  /** One transaction, one commit, for the whole batch: the pets, their claims and their events. */
  async #createAll(creations: readonly PetCreation[]): Promise<CreatedPet[]> {
    return inTransaction(this.#pool, async (client) => {
      const created = await this.#createEach(client, creations);
      await appendEvents(
        client,
        created.flatMap((result, i) =>
          result.replayed
            ? []
            : [petCreated(result.pet, (creations[i] as PetCreation).at ?? new Date(), creations[i]?.cause)],
        ),
      );
      return created;
    });
  }

  /** The pets without a key in one INSERT, then the keyed ones one by one, in key order. */
  async #createEach(client: pg.PoolClient, creations: readonly PetCreation[]): Promise<CreatedPet[]> {
    const results = new Map<PetCreation, CreatedPet>();
    const plain = creations.filter((creation) => !creation.idempotency);
    const plainPets = await insertPets(
      client,
      plain.map((creation) => creation.pet),
    );
    for (const [i, pet] of plainPets.entries())
      results.set(plain[i] as PetCreation, { pet, replayed: false });
    // One by one, in key order: a later one in the batch with the same key sees what this one wrote.
    const keyed = creations.filter((creation) => creation.idempotency).sort(byClaim);
    for (const creation of keyed) results.set(creation, await this.#createKeyed(client, creation));
    return creations.map((creation) => results.get(creation) as CreatedPet);
  }

  async #createKeyed(client: pg.PoolClient, { pet, idempotency }: PetCreation): Promise<CreatedPet> {
    const claim = idempotency as NonNullable<PetCreation['idempotency']>;
    if (!(await this.#idempotency.claim(client, claim))) {
      const { requestHash, id } = await this.#idempotency.recorded(client, claim);
      const { rows } = await client.query<PetRow>(PET_READS.byId(id));
      return { pet: toPet(rows[0] as PetRow), requestHash, replayed: true };
    }
    const [created] = (await insertPets(client, [pet])) as [Pet];
    await this.#idempotency.attach(client, claim, created.id);
    return { pet: created, replayed: false, requestHash: claim.requestHash };
  }

  create(creation: PetCreation): Promise<CreatedPet> {
    return this.#creates.add(creation);
  }

  settled(): Promise<void> {
    return this.#creates.settled();
  }

  createMany(pets: readonly PetRecordInput[]): Promise<Pet[]> {
    return insertPets(this.#pool, pets);
  }

  async findById(id: bigint): Promise<Pet | undefined> {
    const { rows } = await this.#reads.query<PetRow>(PET_READS.byId(id));
    return rows[0] && toPet(rows[0]);
  }

  async findJsonById(id: bigint): Promise<string | undefined> {
    const { rows } = await this.#reads.query<{ json: string }>(PET_READS.jsonById(id));
    return rows[0]?.json;
  }

  async listJson({ status, ids, afterId, limit }: PetListQuery): Promise<PetPageJson> {
    const { rows } = await this.#reads.query<JsonPageRow>(
      ids
        ? PET_READS.jsonPageByIds(ids, status, afterId, limit)
        : status
          ? PET_READS.jsonPageByStatus(status, afterId, limit)
          : PET_READS.jsonPage(afterId, limit),
    );
    const { json, last_id: lastId, more } = rows[0] as JsonPageRow;
    return { json, lastIdIfMore: more && lastId !== null ? lastId : undefined };
  }

  async list({ status, ids, afterId, limit }: PetListQuery): Promise<Pet[]> {
    const { rows } = await this.#reads.query<PetRow>(
      ids
        ? PET_READS.pageByIds(ids, status, afterId, limit)
        : status
          ? PET_READS.pageByStatus(status, afterId, limit)
          : PET_READS.page(afterId, limit),
    );
    return rows.map(toPet);
  }

  async count(): Promise<number> {
    return countRows(this.#pool, 'pets');
  }

  async importBatch(pets: readonly Pet[]): Promise<number> {
    if (pets.length === 0) return 0;
    return inTransaction(this.#pool, async (client) => {
      // Creates wait until this commits: no id can be handed out while the sequence is moved below.
      await client.query('LOCK TABLE pets IN SHARE ROW EXCLUSIVE MODE');
      const { rowCount } = await client.query(
        `INSERT INTO pets (${PET_COLUMNS})
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[])
         ON CONFLICT (id) DO NOTHING`,
        [
          pets.map((p) => p.id),
          pets.map((p) => p.name),
          pets.map((p) => p.categoryId),
          pets.map((p) => p.status),
        ],
      );
      // Explicit ids leave the identity sequence behind: move it past the largest id, never back.
      // (nextval's own value may go unused; ids need only be unique and ascending, not dense.)
      await client.query(
        `SELECT setval(seq, greatest((SELECT max(id) FROM pets), nextval(seq)))
         FROM CAST(pg_get_serial_sequence('pets', 'id') AS regclass) AS seq`,
      );
      return rowCount ?? 0;
    });
  }
}
