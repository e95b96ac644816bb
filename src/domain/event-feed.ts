import type { EventStore, EventType, StoredEvent } from './events.js';
import { DEFAULT_PAGE_SIZE } from './paging.js';

export interface EventFeedQuery {
  after?: bigint | undefined;
  types?: readonly EventType[] | undefined;
  limit?: number | undefined;
}

export interface EventPage {
  events: StoredEvent[];
  /** While more events may follow the page: the id to ask after next. */
  nextAfter?: bigint;
}

/**
 * listEvents and getEvent. The position is the last event id itself (not an opaque cursor): a
 * consumer stores the id of the last event it processed and asks for what came after, and the store
 * guarantees none is ever skipped (EventStore.list).
 */
export class EventFeed {
  readonly #store: EventStore;

  constructor(store: EventStore) {
    this.#store = store;
  }

  async list({ after = 0n, types = [], limit = DEFAULT_PAGE_SIZE }: EventFeedQuery): Promise<EventPage> {
    const unique = [...new Set(types)];
    // One row more than asked tells whether a next page exists without a COUNT.
    const events = await this.#store.list({ afterId: after, types: unique, limit: limit + 1 });
    if (events.length <= limit) return { events };
    events.length = limit;
    return { events, nextAfter: (events[events.length - 1] as StoredEvent).id };
  }

  find(id: bigint): Promise<StoredEvent | undefined> {
    return this.#store.findById(id);
  }
}
