import type pg from 'pg';
import type { ReadStats, ReplicaChange } from '../replica-reads.js';
import { isPostgresUnavailable } from './errors.js';
import { currentReadScope, type ReadScope } from './read-scope.js';
import { replicaLabel } from './replica-label.js';
import { parseLsn } from './transaction.js';
import type { WritePositions } from './write-positions.js';

/** A probe that takes longer than this fails: the replica is set aside. */
const PROBE_TIMEOUT_MS = 1_000;
/** How long a replica that failed is left alone before it is probed again. */
const SET_ASIDE_MS = 3_000;
/** How much of the primary's position history is kept past the lag bound, to measure a lag beyond it. */
const HISTORY_MARGIN_MS = 5_000;

/**
 * A replica's name in logs and metrics (which need no key): its host, port and database, never its
 * user or password. Configuration refuses a URL that does not parse cleanly (replicaLabel).
 */
function replicaName(url: string): string {
  return replicaLabel(url) ?? 'replica';
}

/** One streaming replica: its pool and what its last probe said. */
class Replica {
  readonly name: string;
  /** How far it had replayed at its last probe; replay only moves forward, so it is at least there now. */
  replayed: bigint | undefined;
  lagMs = Number.POSITIVE_INFINITY;
  /** Not used before this time (ms); 0 while in use. */
  asideUntil = 0;
  /** Why it was set aside, while it is. */
  asideFor: unknown;

  constructor(
    readonly pool: pg.Pool,
    url: string,
  ) {
    this.name = replicaName(url);
  }

  usable(now: number, maxLagMs: number): boolean {
    return this.asideUntil <= now && this.replayed !== undefined && this.lagMs <= maxLagMs;
  }
}

export interface ReadRouterOptions {
  primary: pg.Pool;
  replicas: { url: string; pool: pg.Pool }[];
  positions: WritePositions;
  maxLagMs: number;
  now?: () => number;
}

/**
 * Sends the API's reads to a replica fresh enough for the caller, else to the primary (the approach of
 * GitLab's database load balancing: a replica, a chooser, per-key positions).
 *
 * - What is a read, and whose: the request's read scope (src/storage/postgres/read-scope.ts). Outside one, or in
 *   a write's, everything goes to the primary: writes, their transactions, key lookups, background work.
 * - Fresh enough: a replica is used only when its replay is within `maxLagMs` of the primary, and for a
 *   key that wrote, only once it has replayed past the key's last write (WritePositions).
 * - Cheap: each replica's replay position is read by a background probe every interval (randomised,
 *   so nodes do not probe in step), never once per request. Its lag is the age of the oldest primary
 *   position it has not replayed, from the primary's positions sampled at each probe: measured to
 *   within one interval, erring on the late side, and with no clock compared between servers.
 * - Never a client's error: a read that fails on a replica is answered from the primary, and a replica
 *   that is away or overloaded (isPostgresUnavailable, on a read or a probe) is set aside for SET_ASIDE_MS.
 */
export class ReadRouter {
  readonly #primary: pg.Pool;
  readonly #replicas: Replica[];
  readonly #positions: WritePositions;
  /** Each request's position lookup (#wroteBefore), gone with the request's scope. */
  readonly #lookups = new WeakMap<ReadScope, Promise<bigint | undefined>>();
  readonly #maxLagMs: number;
  /** Told of each change of a replica's state (once per change, never once per query). */
  readonly #listeners: ((change: ReplicaChange) => void)[] = [];
  readonly #now: () => number;
  readonly #intervalMs: number;
  /** The primary's positions at past probes, oldest first. */
  readonly #history: { at: number; lsn: bigint }[] = [];
  readonly #reads = { primary: 0, replica: 0 };
  #timer: NodeJS.Timeout | undefined;
  #probing: Promise<void> | undefined;
  #closed = false;

  constructor({ primary, replicas, positions, maxLagMs, now = Date.now }: ReadRouterOptions) {
    this.#primary = primary;
    this.#replicas = replicas.map(({ url, pool }) => new Replica(pool, url));
    this.#positions = positions;
    this.#maxLagMs = maxLagMs;
    this.#now = now;
    // A quarter of the bound, so a replica is judged several times before it could pass it.
    this.#intervalMs = Math.min(500, Math.max(25, Math.floor(maxLagMs / 4)));
  }

  /** Starts probing; the replicas are used from the first probe that finds them fresh. */
  start(): Promise<void> {
    this.#probing = this.#probe();
    return this.#probing;
  }

  /** A pool-like `query` for the stores' reads (pets, orders, events, webhooks). */
  readonly query = ((config: pg.QueryConfig | string, values?: unknown[]) => {
    const scope = currentReadScope();
    if (scope?.replicaReads !== true) return this.#primary.query(config as pg.QueryConfig, values);
    return this.#routed(scope, config, values);
  }) as pg.Pool['query'];

  /**
   * The position the scope's key last wrote up to, looked up once per scope (a request): its other
   * reads ask Redis nothing more, and all of them judge the replicas against the same position.
   */
  #wroteBefore(scope: ReadScope): Promise<bigint | undefined> {
    let position = this.#lookups.get(scope);
    if (position === undefined) {
      position = scope.key === '' ? Promise.resolve(undefined) : this.#positions.get(scope.key);
      this.#lookups.set(scope, position);
    }
    return position;
  }

  async #routed(scope: ReadScope, config: pg.QueryConfig | string, values: unknown[] | undefined) {
    const now = this.#now();
    let candidates = this.#replicas.filter((replica) => replica.usable(now, this.#maxLagMs));
    if (candidates.length > 0) {
      const wrote = await this.#wroteBefore(scope);
      if (wrote !== undefined)
        candidates = candidates.filter((replica) => (replica.replayed as bigint) >= wrote);
    }
    const replica = candidates[Math.floor(Math.random() * candidates.length)];
    if (replica) {
      try {
        const result = await replica.pool.query(config as pg.QueryConfig, values);
        this.#reads.replica++;
        return result;
      } catch (error) {
        // The primary answers this read either way. Only a replica that is away or overloaded is set
        // aside: an error the statement itself caused would set aside every replica, one bad request
        // after another, and move all reads to the primary.
        if (isPostgresUnavailable(error)) this.#setAside(replica, error);
      }
    }
    this.#reads.primary++;
    return this.#primary.query(config as pg.QueryConfig, values);
  }

  /** After a write by `key` committed up to `lsn`: its later reads need a replica at least that far. */
  wrote(key: string, lsn: bigint): Promise<void> {
    return this.#positions.record(key, lsn);
  }

  /** The primary's WAL position now: for writes that did not go through a followed transaction. */
  primaryPosition(): Promise<bigint> {
    return this.#primaryLsn();
  }

  /** The primary's WAL position, asked with a bound on the wait when given one (the probe's). */
  async #primaryLsn(timeoutMs?: number): Promise<bigint> {
    const { rows } = await this.#primary.query<{ lsn: string }>({
      text: 'SELECT pg_current_wal_lsn()::text AS lsn',
      ...(timeoutMs === undefined ? {} : { query_timeout: timeoutMs }),
    } as pg.QueryConfig);
    return parseLsn((rows[0] as { lsn: string }).lsn);
  }

  stats(): ReadStats {
    const now = this.#now();
    return {
      reads: { ...this.#reads },
      replicas: this.#replicas.map((replica) => ({
        name: replica.name,
        lagSeconds: replica.lagMs / 1000,
        setAside: replica.asideUntil > now,
      })),
    };
  }

  /**
   * Tells `listener` of each change of a replica's state from now on, and at once of each replica set
   * aside already (by the first probe, which runs before anyone can listen).
   */
  watch(listener: (change: ReplicaChange) => void): void {
    this.#listeners.push(listener);
    for (const replica of this.#replicas)
      if (replica.asideUntil !== 0)
        listener({ replica: replica.name, setAside: true, error: replica.asideFor });
  }

  #tell(change: ReplicaChange): void {
    for (const listener of this.#listeners) listener(change);
  }

  #setAside(replica: Replica, error: unknown): void {
    // Once per spell: a replica already set aside (its probe failing again) is not told twice.
    const first = replica.asideUntil === 0;
    replica.asideUntil = this.#now() + SET_ASIDE_MS;
    replica.asideFor = error;
    // Used again only once a probe has found it answering, and how far it has replayed.
    replica.replayed = undefined;
    replica.lagMs = Number.POSITIVE_INFINITY;
    if (first) this.#tell({ replica: replica.name, setAside: true, error });
  }

  async #probe(): Promise<void> {
    const at = this.#now();
    try {
      this.#history.push({ at, lsn: await this.#primaryLsn(PROBE_TIMEOUT_MS) });
      const horizon = at - this.#maxLagMs - HISTORY_MARGIN_MS;
      while (this.#history.length > 1 && (this.#history[1] as { at: number }).at < horizon)
        this.#history.shift();
    } catch {
      // The primary did not answer: the lags below are measured against what it said before.
    }
    await Promise.all(this.#replicas.map((replica) => this.#probeReplica(replica)));
    if (this.#closed) return;
    // Randomised (one to one and a half intervals), so nodes started together do not probe in step.
    this.#timer = setTimeout(
      () => {
        this.#probing = this.#probe();
      },
      this.#intervalMs * (1 + Math.random() / 2),
    );
    this.#timer.unref();
  }

  async #probeReplica(replica: Replica): Promise<void> {
    const now = this.#now();
    if (replica.asideUntil > now) return;
    const wasAside = replica.asideUntil !== 0;
    try {
      const { rows } = await replica.pool.query<{ standby: boolean; replayed: string | null }>({
        text: 'SELECT pg_is_in_recovery() AS standby, pg_last_wal_replay_lsn()::text AS replayed',
        query_timeout: PROBE_TIMEOUT_MS,
      } as pg.QueryConfig);
      const row = rows[0];
      if (!row?.standby || row.replayed === null)
        throw new Error('not a streaming replica: pg_is_in_recovery() is false');
      replica.replayed = parseLsn(row.replayed);
      replica.lagMs = this.#lagOf(replica.replayed, this.#now());
      replica.asideUntil = 0;
      if (wasAside) this.#tell({ replica: replica.name, setAside: false });
    } catch (error) {
      this.#setAside(replica, error);
    }
  }

  /**
   * How long ago the primary had WAL this replica has not replayed: the time of the last sample the
   * replica had replayed (everything it lacks was written after it). Behind every sample kept (just
   * started, or far behind), it is not known how far: Infinity, so it is not used.
   */
  #lagOf(replayed: bigint, now: number): number {
    const latest = this.#history[this.#history.length - 1];
    if (!latest) return Number.POSITIVE_INFINITY;
    // Past the primary's latest sample: no lag, while that sample is recent. A primary that stopped
    // answering the probe leaves it old, and the replica is then as far behind as that sample may be.
    if (replayed >= latest.lsn) return now - latest.at <= 2 * this.#intervalMs ? 0 : now - latest.at;
    let since: number | undefined;
    for (const sample of this.#history) {
      if (sample.lsn > replayed) break;
      since = sample.at;
    }
    return since === undefined ? Number.POSITIVE_INFINITY : now - since;
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#probing?.catch(() => undefined);
    clearTimeout(this.#timer);
    await Promise.all(this.#replicas.map((replica) => (replica.pool.ended ? undefined : replica.pool.end())));
    await this.#positions.close();
  }
}
