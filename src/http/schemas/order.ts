import { type Static, Type } from 'typebox';
import {
  ORDER_STATUSES,
  type Order as OrderModel,
  type OrderStatus as OrderStatusValue,
} from '../../domain/order.js';
import { Cursor, Int64, Limit, ref, SelectedIds } from './common.js';

/**
 * The Store's orders as docs/api.md states them ("The Store: orders"). Like the pets schemas, these
 * validate requests, type the handlers, drive serialisation and are the OpenAPI document's components.
 */

// Examples, as the OpenAPI document and a docs page show them; a test checks each against its schema.
const PLACED = { id: 1, petId: 1, status: 'placed', placedAt: '2026-11-23T09:30:00.000Z' };
const DELIVERED = { id: 2, petId: 2, status: 'delivered', placedAt: '2026-11-23T09:31:12.345Z' };

export const OrderStatus = Type.Unsafe<OrderStatusValue>({
  $id: 'OrderStatus',
  type: 'string',
  enum: [...ORDER_STATUSES],
  description:
    'Where an order stands: `placed` (its animal is `pending`), then `delivered` (the animal is `sold`) or ' +
    '`cancelled` (the animal is `available` again). Delivered and cancelled orders never change.',
});

const PetIdOfOrder = (description: string) => Int64({ description, minimum: 1 });

export const NewOrder = Type.Object(
  {
    petId: PetIdOfOrder(
      'The animal to order (int64, exact). It must exist (else 400) and be `available` (else 409).',
    ),
  },
  {
    $id: 'NewOrder',
    additionalProperties: false,
    description: 'The request body for placing an order. Any other property is refused.',
    examples: [{ petId: PLACED.petId }],
  },
);

export const Order = Type.Object(
  {
    id: Int64({
      description: 'Unique identifier, assigned by the service when the order is placed.',
      minimum: 1,
    }),
    petId: PetIdOfOrder('The animal ordered.'),
    status: ref(OrderStatus),
    placedAt: Type.Unsafe<Date>({
      type: 'string',
      format: 'date-time',
      description: 'When the order was placed: an RFC 3339 date-time in UTC, assigned by the service.',
    }),
  },
  {
    $id: 'Order',
    additionalProperties: false,
    description: 'An order as returned. All four fields are always present.',
    examples: [PLACED],
  },
);

export const Orders = Type.Array(ref(Order), {
  $id: 'Orders',
  description: 'A page of orders in ascending id order.',
  examples: [[PLACED, DELIVERED]],
});

export const ListOrdersQuery = Type.Object(
  {
    limit: Type.Optional(Limit('orders')),
    status: Type.Optional(
      Type.Unsafe<Static<typeof OrderStatus>>({
        ...ref(OrderStatus),
        description: 'Only orders with this status.',
      }),
    ),
    petId: Type.Optional(PetIdOfOrder('Only orders for this animal.')),
    id: Type.Optional(SelectedIds('orders')),
    cursor: Type.Optional(Cursor()),
  },
  // As for listPets: an unknown parameter is refused, not ignored.
  { additionalProperties: false },
);

export const OrderIdParams = Type.Object({
  orderId: Int64({ description: 'Identifier of the order (1 to 2^63-1).', minimum: 1 }),
});

/** Shared schemas, registered once with Fastify, the validator and the OpenAPI generator. */
export const ORDER_SCHEMAS = [OrderStatus, NewOrder, Order, Orders];

// Compile-time proof that the response schema and the domain type agree.
const _orderMatchesModel: OrderModel = {} as Static<typeof Order>;
void _orderMatchesModel;
