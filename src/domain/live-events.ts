import type { EventStore, EventType, StoredEvent } from './events.js';

/** What a follower is sent, and how it says it can take more. */
export interface EventSink {
  /** Events in ascending id order, each once, none skipped (of the follower's types). */
  send(events: readonly StoredEvent[]): void;
  /**
   * Resolves once the follower may be sent more while catching up: what was sent has gone out, and
   * the reader may read again (its rate limit). Catching up waits for it between pages.
   */
  drained(): Promise<void>;
  /** Catching up failed (the database did not answer): the follower is closed. */
  failed(error: unknown): void;
  /** Asked to start `now`: told the newest event's id when it joined, before anything is sent. */
  startsAfter(id: bigint): void;
}

export interface FollowQuery {
  /** Only events with a greater id; `now`: only those after the newest one committed as it joins. */
  after: bigint | 'now';
  /** Only events of these types; empty: every type. */
  types: readonly EventType[];
}

export interface LiveEventsOptions {
  /** Told when reading new events failed; they are read again after a pause. */
  onError?: (error: unknown) => void;
  /**
   * Where catching up reads its pages, when not from `store`: a copy that may be behind it (a read
   * replica). A page from it is sent as it is (the feed's rule holds on any copy); only a short page,
   * which would end the catch-up, is read again from `store`, so a copy behind the node's own reads
   * never ends a catch-up early.
   */
  catchUpStore?: Pick<EventStore, 'list'>;
}

/** Events read per query, when catching up and when following. */
const PAGE_SIZE = 100;
/**
 * Events a follower that is still catching up keeps from the node's reads. Past this many they are
 * dropped, and read from the database instead once catching up has reached them: memory stays bounded
 * however far behind a follower starts and however fast events commit meanwhile.
 */
const MAX_HELD = 1_000;
/** After a read failed: how long before reading again. */
const RETRY_MS = 1_000;

class Follower {
  /** The greatest id this follower has been sent or has passed over (other types). */
  cursor: bigint;
  /** Asked to start after the newest event: its cursor is set once that is read. */
  readonly fromNow: boolean;
  /** While catching up: events read by the node meanwhile, held until catching up reaches them. */
  held: StoredEvent[] | undefined = [];
  /** How many times held events were dropped (too many): catching up must read past the last drop. */
  drops = 0;
  closed = false;
  readonly types: ReadonlySet<EventType> | undefined;

  constructor(
    { after, types }: FollowQuery,
    readonly sink: EventSink,
  ) {
    this.fromNow = after === 'now';
    this.cursor = after === 'now' ? 0n : after;
    this.types = types.length > 0 ? new Set(types) : undefined;
  }

  /** Sends what is new to it among `events` (ascending), and moves its cursor past them all. */
  take(events: readonly StoredEvent[]): void {
    const last = events[events.length - 1];
    if (!last || last.id <= this.cursor) return;
    const wanted = events.filter((e) => e.id > this.cursor && (!this.types || this.types.has(e.type)));
    this.cursor = last.id;
    if (wanted.length > 0) this.sink.send(wanted);
  }
}

export interface Following {
  /** Stops sending; idempotent. */
  close(): void;
}

/**
 * The events of one node's live streams, as they commit. The node reads the log once for all of them:
 * one watch on the store (a NOTIFY on PostgreSQL, SQLite's change counter across processes) and one
 * query per wake-up, whatever the number of streams, each stream taking the events of its types. A
 * stream that joins catches up from its own position first, by pages of the feed, then follows.
 *
 * Nothing is skipped, because every read goes through EventStore.list, the feed's own rule (an event
 * is returned only once every smaller id is visible or can no longer appear), and a follower joins the
 * node's reads before its last catch-up read begins: what the node read before it joined, the catch-up
 * read sees; what the node reads after, it is handed. Ids already sent are never sent again.
 */
export class LiveEvents {
  readonly #store: EventStore;
  readonly #catchUpStore: Pick<EventStore, 'list'>;
  readonly #onError: (error: unknown) => void;
  readonly #followers = new Set<Follower>();
  /** While anyone follows: the greatest id the node has read (and handed to its followers). */
  #head: Promise<bigint> | undefined;
  #last = 0n;
  #unwatch: (() => void) | undefined;
  #reading = false;
  #readAgain = false;
  /** Changed on every start and stop: a read begun before a stop hands nothing to a later start. */
  #generation = 0;

  constructor(
    store: EventStore,
    { onError = () => undefined, catchUpStore = store }: LiveEventsOptions = {},
  ) {
    this.#store = store;
    this.#catchUpStore = catchUpStore;
    this.#onError = onError;
  }

  /** Followers open now. */
  get size(): number {
    return this.#followers.size;
  }

  /** Sends `sink` the events after `query.after` of its types, from the log then as they commit. */
  follow(query: FollowQuery, sink: EventSink): Following {
    const follower = new Follower(query, sink);
    this.#followers.add(follower);
    this.#start();
    void this.#catchUp(follower);
    return { close: () => this.#leave(follower) };
  }

  #start(): void {
    if (this.#head) return;
    const generation = ++this.#generation;
    // Watch first: a commit between reading the head and watching would otherwise go unnoticed.
    this.#unwatch = this.#store.watch(() => this.#read());
    this.#head = this.#store.lastId().then((last) => {
      if (generation === this.#generation) this.#last = last;
      return last;
    });
    // A head that could not be read: the followers waiting on it are failed, and the next join tries again.
    this.#head.catch(() => {
      if (generation === this.#generation) this.#stop();
    });
  }

  #stop(): void {
    this.#generation++;
    this.#unwatch?.();
    this.#unwatch = undefined;
    this.#head = undefined;
    this.#readAgain = false;
  }

  #leave(follower: Follower): void {
    if (follower.closed) return;
    follower.closed = true;
    follower.held = undefined;
    this.#followers.delete(follower);
    if (this.#followers.size === 0) this.#stop();
  }

  async #catchUp(follower: Follower): Promise<void> {
    const types = follower.types ? [...follower.types] : [];
    try {
      await this.#head;
      if (follower.fromNow) {
        // Read once it has joined: whatever commits after this read, the node's reads or the
        // catch-up below hand it on.
        follower.cursor = await this.#store.lastId();
        if (follower.closed) return;
        follower.sink.startsAfter(follower.cursor);
      }
      // The store a short page must come from to end the catch-up: the one the node reads.
      let from = this.#catchUpStore;
      for (;;) {
        if (follower.closed) return;
        const drops = follower.drops;
        const page = await from.list({ afterId: follower.cursor, types, limit: PAGE_SIZE });
        if (follower.closed) return;
        const last = page[page.length - 1];
        if (last) {
          follower.sink.send(page);
          follower.cursor = last.id;
        }
        if (page.length === PAGE_SIZE || follower.drops !== drops) {
          from = this.#catchUpStore;
          await follower.sink.drained();
          continue;
        }
        if (from !== this.#store) {
          from = this.#store;
          continue;
        }
        // Caught up with the node's reads: what it read meanwhile follows, and then whatever it reads.
        const held = follower.held ?? [];
        follower.held = undefined;
        follower.take(held);
        return;
      }
    } catch (error) {
      if (follower.closed) return;
      this.#leave(follower);
      follower.sink.failed(error);
    }
  }

  /** Reads what committed since the node's last read, and hands it to every follower. */
  #read(): void {
    if (!this.#head) return;
    if (this.#reading) {
      this.#readAgain = true;
      return;
    }
    this.#reading = true;
    const generation = this.#generation;
    void (async () => {
      try {
        await this.#head;
        do {
          this.#readAgain = false;
          let page: StoredEvent[];
          do {
            page = await this.#store.list({ afterId: this.#last, types: [], limit: PAGE_SIZE });
            if (generation !== this.#generation) return;
            const last = page[page.length - 1];
            if (!last) break;
            this.#last = last.id;
            this.#hand(page);
          } while (page.length === PAGE_SIZE);
        } while (this.#readAgain);
      } catch (error) {
        this.#onError(error);
        // Read again after a pause: the notifications that came meanwhile may be all there is.
        setTimeout(() => this.#read(), RETRY_MS).unref();
      } finally {
        this.#reading = false;
        // A wake-up that came while a stopped generation's read ran out is this one's to answer.
        if (this.#readAgain) this.#read();
      }
    })();
  }

  #hand(events: readonly StoredEvent[]): void {
    for (const follower of this.#followers) {
      const held = follower.held;
      if (!held) {
        follower.take(events);
      } else if (held.length + events.length <= MAX_HELD) {
        held.push(...events);
      } else {
        held.length = 0;
        follower.drops++;
      }
    }
  }
}
