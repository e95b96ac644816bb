import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import { DEFAULT_PAGE_SIZE, idSet } from '../../domain/paging.js';
import type { StoreOrders } from '../../domain/store-orders.js';
import { ApiError } from '../request/errors.js';
import { ref } from '../schemas/common.js';
import { ListOrdersQuery, NewOrder, Order, OrderIdParams, Orders } from '../schemas/order.js';
import { BODY_ERRORS, errorResponse, invalid, otherErrors, response } from '../schemas/responses.js';
import {
  IdempotentCreateHeaders,
  idempotentCreateResponses,
  requestIdempotencyKey,
  sendCreated,
} from './idempotent-create.js';
import { type Links, linkHeader } from './links.js';
import { API_ROUTES_AFTER, noBody, repeatable } from './route-helpers.js';

export interface OrderRoutesOptions {
  orders: StoreOrders;
  links: Links;
}

// As for pets: each error response is documented with a message the service really sends for it
// (test/http/openapi-examples.test.ts provokes them and compares); 401, 403, 429 and 503 are documented
// by the plugins whose hooks give them; each route declares the scope it needs in its config (scopes.ts).
const NOT_FOUND = 'no order has this id';
const TAGS = ['store'];
const invalidOrderId = invalid(
  '`orderId` is not an integer from 1 to 2^63-1, or a request body was sent',
  'orderId must be an integer',
);
const notFound = errorResponse('No order has this id', { not_found: NOT_FOUND });

const routes: FastifyPluginAsyncTypebox<OrderRoutesOptions> = async (app, { orders, links }) => {
  app.get(
    '/store/orders',
    {
      config: { scope: 'orders:read' },
      preValidation: repeatable('id'),
      schema: {
        operationId: 'listOrders',
        summary: 'List orders',
        description:
          'Orders in ascending `id` order, at most `limit` of them, optionally only those with a `status`, for ' +
          'one animal (`petId`) or with some ids (`?id=3&id=17`, up to 100; ids that do not exist are simply ' +
          'absent). Paged exactly as listPets: while more may exist the response carries ' +
          '`Link: <…>; rel="next"`; the cursor in it is good only with the same filters. The body is a bare array.',
        tags: TAGS,
        querystring: ListOrdersQuery,
        response: {
          200: response('A page of orders', Orders, {
            Link: Type.String({
              description: '`<…/v1/store/orders?…&cursor=…>; rel="next"` while more orders may exist.',
            }),
          }),
          400: invalid(
            'Invalid `limit`, `status`, `petId`, `id` or `cursor`; more than 100 `id`s',
            'petId must be an integer',
          ),
          default: otherErrors('GET, HEAD, POST'),
        },
      },
    },
    async (request, reply) => {
      // Ajv fills in the default; the fallback only satisfies the type.
      const { limit = DEFAULT_PAGE_SIZE, status, petId, id: ids, cursor } = request.query;
      const page = await orders.list({ limit, status, petId, ids, cursor });
      if (page.nextCursor)
        reply.header(
          'Link',
          linkHeader(
            links.ordersPage(limit, { status, petId, ids: ids && idSet(ids) }, page.nextCursor),
            'next',
          ),
        );
      return page.orders;
    },
  );

  app.post(
    '/store/orders',
    {
      config: { scope: 'orders:write' },
      schema: {
        operationId: 'placeOrder',
        summary: 'Place an order for an animal',
        description:
          'Orders an `available` animal: in the one transaction that stores the order (`placed`), the animal ' +
          'becomes `pending`. Of concurrent orders for one animal, on one node or many, exactly one is `201`; ' +
          'every other is `409`. An animal that does not exist is a `400` naming `petId`.',
        tags: TAGS,
        headers: IdempotentCreateHeaders,
        body: ref(NewOrder),
        response: {
          ...idempotentCreateResponses(
            'Order placed, or (with a reused `Idempotency-Key`) the order first placed',
            ref(Order),
            'order',
          ),
          400: invalid(
            'Body missing `petId`, or containing an invalid value or unknown properties; no animal has this ' +
              '`petId`; or a malformed `Idempotency-Key`',
            'petId must be the id of an existing animal',
          ),
          409: errorResponse('The animal is not `available` (it is `pending` or `sold`)', {
            conflict: 'the animal is pending; only an available animal can be ordered',
          }),
          default: otherErrors('GET, HEAD, POST'),
          ...BODY_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const { order, replayed } = await orders.place({
        caller: request.apiKeyHash,
        order: request.body,
        idempotencyKey: requestIdempotencyKey(request.headers),
      });
      return sendCreated(reply, links.order(order.id), order, replayed);
    },
  );

  app.get(
    '/store/orders/:orderId',
    {
      config: { scope: 'orders:read' },
      schema: {
        operationId: 'getOrder',
        summary: 'Fetch one order',
        tags: TAGS,
        params: OrderIdParams,
        response: {
          200: response('Order found', ref(Order)),
          400: invalid('`orderId` is not an integer from 1 to 2^63-1', 'orderId must be an integer'),
          404: notFound,
          default: otherErrors('GET, HEAD'),
        },
      },
    },
    async (request) => {
      const order = await orders.find(request.params.orderId);
      if (!order) throw new ApiError('not_found', NOT_FOUND);
      return order;
    },
  );

  for (const [operationId, move, effect] of [
    ['deliverOrder', 'deliver', '`placed` → `delivered`; its animal `pending` → `sold`'],
    ['cancelOrder', 'cancel', '`placed` → `cancelled`; its animal `pending` → `available`'],
  ] as const) {
    const settled = move === 'deliver' ? 'delivered' : 'cancelled';
    app.post(
      `/store/orders/:orderId/${move}`,
      {
        config: { scope: 'orders:write' },
        schema: {
          operationId,
          summary: `${move === 'deliver' ? 'Deliver' : 'Cancel'} an order`,
          description:
            `${effect}, in one transaction: never one without the other. Asking again once the order is ` +
            `\`${settled}\` answers \`200\` with it unchanged (a safe retry); any other move is \`409\`. No request body.`,
          tags: TAGS,
          params: OrderIdParams,
          response: {
            200: response(`The order, \`${settled}\``, ref(Order)),
            400: invalidOrderId,
            404: notFound,
            409: errorResponse(`The order is no longer \`placed\` and not \`${settled}\``, {
              conflict: `the order is ${move === 'deliver' ? 'cancelled' : 'delivered'}; only a placed order can be ${settled}`,
            }),
            default: otherErrors('POST'),
          },
        },
        preValidation: noBody,
      },
      async (request) => {
        const { orderId } = request.params;
        const order = await (move === 'deliver' ? orders.deliver(orderId) : orders.cancel(orderId));
        if (!order) throw new ApiError('not_found', NOT_FOUND);
        return order;
      },
    );
  }
};

/** The Store's operations, behind authentication and rate limits, described in the OpenAPI document. */
export const orderRoutes = fp(routes, {
  name: 'order-routes',
  fastify: '5.x',
  dependencies: API_ROUTES_AFTER,
});
