import type Database from 'better-sqlite3';
import type { EventListQuery, EventStore, EventType, NewEvent, StoredEvent } from '../../domain/events.js';

/** An events row as a raw statement returns it: id, type, occurred_at (epoch ms), data. */
type EventTuple = [bigint, EventType, bigint, string];
const EVENT_COLUMNS = 'id, type, occurred_at, data';

const toEvent = ([id, type, occurredAt, data]: EventTuple): StoredEvent => ({
  id,
  type,
  occurredAt: new Date(Number(occurredAt)),
  data,
});

/**
 * A page of events after an id, of any type or of the given number of types. By type, each type's
 * page is read through the (type, id) index and the pages merged: `type IN (…) ORDER BY id` let SQLite
 * walk every event by id instead (it cannot know a rare type is rare), so a page of a rare type read
 * the whole table. This reads at most `types × limit` rows, whatever the mix.
 */
function pageSql(types: number, limit: number): string {
  if (types === 0) return `SELECT ${EVENT_COLUMNS} FROM events WHERE id > ? ORDER BY id LIMIT ${limit}`;
  const ofType = `SELECT * FROM (SELECT ${EVENT_COLUMNS} FROM events WHERE type = ? AND id > ? ORDER BY id LIMIT ${limit})`;
  return `SELECT * FROM (${Array(types).fill(ofType).join(' UNION ALL ')}) ORDER BY id LIMIT ${limit}`;
}

/**
 * The event log's write side on SQLite: `append` runs inside the transaction of the change it records
 * (pets.ts, orders.ts), so a change and its event commit together or not at all. Its deliveries fan out
 * afterwards (delivery-queue.ts, fanOut), so the change costs the same however many endpoints there are.
 * SQLite has one writer at a time and ids are drawn inside the write transaction, so ids ascend in
 * commit order: a reader can never see an event before one with a smaller id.
 */
export class SqliteEventLog {
  readonly #insert: Database.Statement<[string, number, string, string | null], bigint>;
  readonly #anyEnabled: Database.Statement<[], number>;
  readonly #listeners = new Set<() => void>();
  readonly #appendListeners = new Set<() => void>();
  #wakeScheduled = false;
  #appendScheduled = false;

  constructor(db: Database.Database) {
    this.#insert = db
      .prepare<[string, number, string, string | null], bigint>(
        'INSERT INTO events (type, occurred_at, data, trace_context) VALUES (?, ?, ?, ?) RETURNING id',
      )
      .pluck()
      .safeIntegers(true);
    this.#anyEnabled = db
      .prepare<[], number>("SELECT 1 FROM webhook_endpoints WHERE status = 'enabled' LIMIT 1")
      .pluck();
  }

  /** Records the event in the caller's transaction; resolves to its id. */
  append(event: NewEvent): bigint {
    const at = event.occurredAt.getTime();
    const eventId = this.#insert.get(event.type, at, event.data, event.cause ?? null) as bigint;
    if (this.#appendListeners.size > 0) this.#appended();
    // An endpoint may want it: the deliverer fans it out (one row read, however many endpoints).
    if (this.#anyEnabled.get() !== undefined) this.wake();
    return eventId;
  }

  /** `listener` is called (after the transaction, on a later turn) when deliveries may be due. */
  watch(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** `listener` is called (after the transaction, on a later turn) when this process recorded events. */
  watchAppends(listener: () => void): () => void {
    this.#appendListeners.add(listener);
    return () => this.#appendListeners.delete(listener);
  }

  #appended(): void {
    if (this.#appendScheduled) return;
    this.#appendScheduled = true;
    setImmediate(() => {
      this.#appendScheduled = false;
      for (const listener of this.#appendListeners) listener();
    });
  }

  /** Tells the watchers on a later turn: after the current transaction has committed (or rolled back: a wake is harmless). */
  wake(): void {
    if (this.#wakeScheduled) return;
    this.#wakeScheduled = true;
    setImmediate(() => {
      this.#wakeScheduled = false;
      for (const listener of this.#listeners) listener();
    });
  }
}

/**
 * How often, while a reader watches, this process asks SQLite whether another process (another worker
 * on the same file) committed: `PRAGMA data_version` reads the file's change counter from shared
 * memory, a few microseconds, and the latency it adds is at most this.
 */
const OTHER_PROCESSES_POLL_MS = 100;

/**
 * Calls `listener` within OTHER_PROCESSES_POLL_MS of a commit by another connection to the file (another
 * worker, a delivery process beside the API): `PRAGMA data_version` changes with each. Returns the
 * unsubscribe.
 */
export function watchOtherProcesses(db: Database.Database, listener: () => void): () => void {
  const version = db.prepare<[], number>('PRAGMA data_version').pluck();
  let seen = version.get();
  const timer = setInterval(() => {
    let now: number | undefined;
    try {
      now = version.get();
    } catch {
      return; // closed, or unreadable for a moment: the next tick asks again
    }
    if (now !== seen) {
      seen = now;
      listener();
    }
  }, OTHER_PROCESSES_POLL_MS);
  timer.unref();
  return () => clearInterval(timer);
}

export class SqliteEventStore implements EventStore {
  readonly #db: Database.Database;
  readonly #log: SqliteEventLog;
  readonly #byId: Database.Statement<[bigint], EventTuple>;
  readonly #lastId: Database.Statement<[], bigint>;
  /** Page statements by LIMIT and number of types. */
  readonly #pages = new Map<string, Database.Statement<unknown[], EventTuple>>();

  constructor(db: Database.Database, log: SqliteEventLog) {
    this.#db = db;
    this.#log = log;
    this.#byId = db
      .prepare<[bigint], EventTuple>(`SELECT ${EVENT_COLUMNS} FROM events WHERE id = ?`)
      .raw(true)
      .safeIntegers(true);
    this.#lastId = db
      .prepare<[], bigint>('SELECT coalesce(max(id), 0) FROM events')
      .pluck()
      .safeIntegers(true);
  }

  /** One writer at a time, ids drawn inside its transaction: the greatest committed id has no gap below it. */
  async lastId(): Promise<bigint> {
    return this.#lastId.get() as bigint;
  }

  /**
   * This process's commits wake at once (the log); other processes' are seen by their change to
   * `PRAGMA data_version`, which counts the commits of every other connection to the file.
   */
  watch(listener: () => void): () => void {
    const unwatch = this.#log.watchAppends(listener);
    const unwatchOthers = watchOtherProcesses(this.#db, listener);
    return () => {
      unwatchOthers();
      unwatch();
    };
  }

  async list({ afterId, types, limit }: EventListQuery): Promise<StoredEvent[]> {
    const name = `${limit} ${types.length}`;
    let page = this.#pages.get(name);
    if (!page) {
      if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`invalid page size: ${limit}`);
      page = this.#db
        .prepare<unknown[], EventTuple>(pageSql(types.length, limit))
        .raw(true)
        .safeIntegers(true);
      this.#pages.set(name, page);
    }
    const values = types.length === 0 ? [afterId] : types.flatMap((type) => [type, afterId]);
    return page.all(...values).map(toEvent);
  }

  async findById(id: bigint): Promise<StoredEvent | undefined> {
    const row = this.#byId.get(id);
    return row && toEvent(row);
  }

  async deleteOlderThan(before: Date, batchSize: number): Promise<number> {
    return this.#db
      .transaction(() => {
        const ids = this.#db
          .prepare<[number, number], bigint>(
            'SELECT id FROM events WHERE occurred_at < ? ORDER BY id LIMIT ?',
          )
          .pluck()
          .safeIntegers(true)
          .all(before.getTime(), batchSize);
        if (ids.length === 0) return 0;
        const last = ids[ids.length - 1] as bigint;
        this.#db
          .prepare(
            'DELETE FROM webhook_deliveries WHERE event_id <= ? AND event_id IN (SELECT id FROM events WHERE id <= ? AND occurred_at < ?)',
          )
          .run(last, last, before.getTime());
        return this.#db
          .prepare('DELETE FROM events WHERE id <= ? AND occurred_at < ?')
          .run(last, before.getTime()).changes;
      })
      .immediate();
  }

  async count(): Promise<number> {
    return this.#db.prepare<[], number>('SELECT count(*) FROM events').pluck().get() as number;
  }

  async importBatch(events: readonly StoredEvent[]): Promise<number> {
    const insert = this.#db.prepare<[bigint, string, number, string]>(
      'INSERT INTO events (id, type, occurred_at, data) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING',
    );
    // Imported events were delivered (or not) where they came from: the fan-out starts after them.
    const skip = this.#db.prepare<[]>(
      'UPDATE webhook_fanout SET last_event_id = max(last_event_id, (SELECT coalesce(max(id), 0) FROM events))',
    );
    return this.#db
      .transaction(() => {
        const inserted = events.reduce(
          (n, e) => n + insert.run(e.id, e.type, e.occurredAt.getTime(), e.data).changes,
          0,
        );
        skip.run();
        return inserted;
      })
      .immediate();
  }
}
