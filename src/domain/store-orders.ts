import { ConflictError, IdempotencyKeyReusedError, UnknownReferenceError } from './errors.js';
import { eventCause } from './event-cause.js';
import { idempotencyClaim, orderRequestHashOf } from './idempotency.js';
import type { NewOrder, Order, OrderSettlement, OrderStatus } from './order.js';
import { type CursorCodec, DEFAULT_PAGE_SIZE, idSet } from './paging.js';
import type { OrderStore } from './storage.js';

export interface OrderQuery {
  limit?: number | undefined;
  status?: OrderStatus | undefined;
  petId?: bigint | undefined;
  /** Only these orders; those that do not exist are simply absent. */
  ids?: readonly bigint[] | undefined;
  cursor?: string | undefined;
}

export interface OrderPage {
  orders: Order[];
  /** The cursor of the following page; absent on the last page. */
  nextCursor?: string;
}

export interface OrderPlacementRequest {
  /** SHA-256 of the caller's API key: an Idempotency-Key is scoped to its sender. */
  caller: string;
  order: NewOrder;
  /** The Idempotency-Key sent with the request, if any. */
  idempotencyKey?: string | undefined;
}

/**
 * The use cases of the Store, one per operation, free of HTTP and SQL. Every rule that races (one
 * placed order per animal, order and animal changing together) is the store's, held by its database:
 * nothing here reads a state and then writes on the strength of it.
 */
export class StoreOrders {
  readonly #store: OrderStore;
  readonly #cursors: CursorCodec;
  readonly #now: () => Date;

  /** `cursors` must be a codec of the orders' own scope: a pets cursor is not an orders cursor. */
  constructor(store: OrderStore, cursors: CursorCodec, now: () => Date) {
    this.#store = store;
    this.#cursors = cursors;
    this.#now = now;
  }

  /**
   * placeOrder: the animal must exist (else the request is invalid) and be available (else a
   * conflict naming its status); it becomes pending in the transaction that stores the order. With an
   * Idempotency-Key, a retry with the same body within the window gets the first order back and
   * changes nothing; the same key with another animal is refused.
   */
  async place({ caller, order, idempotencyKey }: OrderPlacementRequest): Promise<{
    order: Order;
    replayed: boolean;
  }> {
    const at = this.#now();
    const requestHash = orderRequestHashOf(order);
    const placed = await this.#store.place({
      petId: order.petId,
      at,
      cause: eventCause(),
      idempotency:
        idempotencyKey === undefined ? undefined : idempotencyClaim(caller, idempotencyKey, requestHash, at),
    });
    switch (placed.outcome) {
      case 'placed':
        return { order: placed.order, replayed: false };
      case 'replayed':
        if (placed.requestHash !== requestHash) throw new IdempotencyKeyReusedError();
        return { order: placed.order, replayed: true };
      case 'unknown_pet':
        throw new UnknownReferenceError('petId must be the id of an existing animal');
      case 'pet_not_available':
        throw new ConflictError(`the animal is ${placed.petStatus}; only an available animal can be ordered`);
    }
  }

  /** deliverOrder: placed → delivered, the animal pending → sold. Undefined for an unknown order. */
  deliver(id: bigint): Promise<Order | undefined> {
    return this.#settle(id, 'delivered');
  }

  /** cancelOrder: placed → cancelled, the animal pending → available. Undefined for an unknown order. */
  cancel(id: bigint): Promise<Order | undefined> {
    return this.#settle(id, 'cancelled');
  }

  /** Asking again for the status the order is in is a safe retry: the order, unchanged. */
  async #settle(id: bigint, to: OrderSettlement): Promise<Order | undefined> {
    const settled = await this.#store.settle(id, to, this.#now(), eventCause());
    switch (settled.outcome) {
      case 'settled':
      case 'unchanged':
        return settled.order;
      case 'conflict':
        throw new ConflictError(`the order is ${settled.order.status}; only a placed order can be ${to}`);
      case 'unknown_order':
        return undefined;
    }
  }

  /** Ascending id order: keyset paging visits each order once, whatever is placed meanwhile. */
  async list(query: OrderQuery): Promise<OrderPage> {
    const limit = query.limit ?? DEFAULT_PAGE_SIZE;
    const filter = { status: query.status, petId: query.petId, ids: query.ids && idSet(query.ids) };
    const afterId = query.cursor ? this.#cursors.decode(query.cursor, filter).afterId : 0n;
    // One row more than asked tells whether a next page exists without a COUNT.
    const orders = await this.#store.list({ afterId, ...filter, limit: limit + 1 });
    if (orders.length <= limit) return { orders };
    orders.length = limit;
    const last = orders[orders.length - 1] as Order;
    return { orders, nextCursor: this.#cursors.encode({ afterId: last.id, ...filter }) };
  }

  find(id: bigint): Promise<Order | undefined> {
    return this.#store.findById(id);
  }
}
