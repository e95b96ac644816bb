import type { PetStatus } from './pet.js';

/**
 * The life of an order (docs/api.md, "The Store: orders"): placed, then delivered or cancelled, and
 * never anything after that.
 */
export const ORDER_STATUSES = ['placed', 'delivered', 'cancelled'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

/** The two moves out of `placed`. */
export type OrderSettlement = Exclude<OrderStatus, 'placed'>;

/**
 * What an order in each status makes of its animal: ordering takes an available animal to pending,
 * delivering makes it sold, cancelling makes it available again. An animal's status changes only so.
 */
export const PET_STATUS_BY_ORDER: Readonly<Record<OrderStatus, PetStatus>> = {
  placed: 'pending',
  delivered: 'sold',
  cancelled: 'available',
};

/** The only animal status an order may be placed for. */
export const ORDERABLE_PET_STATUS: PetStatus = 'available';

/** An order as the service stores and returns it; int64 values are bigints, as for pets. */
export interface Order {
  id: bigint;
  petId: bigint;
  status: OrderStatus;
  /** When it was placed, by the clock of the node that placed it (millisecond precision). */
  placedAt: Date;
}

/** What a client sends to place an order. */
export interface NewOrder {
  petId: bigint;
}
