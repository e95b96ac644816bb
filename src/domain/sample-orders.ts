import type { OrderStatus } from './order.js';

/** How much of a seeded store is ordered, and how those orders stand. */
export interface OrderShares {
  /** Share of the new animals that get an order (0 to 1). */
  ordered: number;
  /** Share of those orders delivered (their animal sold); 0 to 1. */
  delivered: number;
  /** Share of those orders cancelled (their animal available again); the rest stay placed. */
  cancelled: number;
}

/** A store where about a third of the animals were ordered: half of those delivered, a fifth cancelled. */
export const DEFAULT_ORDER_SHARES: OrderShares = { ordered: 0.3, delivered: 0.5, cancelled: 0.2 };

/** The order a new animal gets, if any: its status drawn by the shares. */
export function sampleOrderStatus(
  shares: OrderShares,
  random: () => number = Math.random,
): OrderStatus | undefined {
  if (random() >= shares.ordered) return undefined;
  const roll = random();
  if (roll < shares.delivered) return 'delivered';
  if (roll < shares.delivered + shares.cancelled) return 'cancelled';
  return 'placed';
}
