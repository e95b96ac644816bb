/** The benchmark's scenarios: what each connection asks for, built from the ids and cursors of one dataset. */

/**
 * One part of a scenario's traffic: GETs of one of `paths`, a create with a distinct body, or an order
 * for the next available animal (each ordered once; the load process lists them before it starts).
 */
export type TrafficPart =
  | { kind: 'get'; paths: string[]; upTo?: number }
  | { kind: 'create'; upTo?: number }
  | { kind: 'place'; upTo?: number };

/** What the load process is told to do (bench/load.ts). */
export interface LoadSpec {
  url: string;
  key: string;
  connections: number;
  seconds: number;
  /** Chosen per request by a roll of 0..100 against each part's cumulative `upTo` (100 when absent). */
  mix: TrafficPart[];
}

export const SCENARIOS = [
  'list',
  'list-status',
  'page',
  'get',
  'create',
  'create-with-webhook',
  'create-at-endpoint-limit',
  'mixed',
  'place-order',
  'list-orders',
] as const;
export type Scenario = (typeof SCENARIOS)[number];

/**
 * The create scenarios run with webhook endpoints registered (bench/run.ts), and how many: one, and as
 * many as WEBHOOK_MAX_ENDPOINTS allows by default (a change's own work must not grow with them).
 */
export const WEBHOOK_ENDPOINTS: Partial<Record<Scenario, number>> = {
  'create-with-webhook': 1,
  'create-at-endpoint-limit': 100,
};

export interface Dataset {
  /** Number of pets seeded; their ids are 1..size. */
  size: number;
  /** `/v1/pets?limit=20&cursor=…` URLs whose cursors point at random depths of the data. */
  deepPages: string[];
}

const STATUSES = ['available', 'pending', 'sold'];
const ORDER_STATUSES = ['placed', 'delivered', 'cancelled'];
const SAMPLES = 2000;

export function trafficFor(scenario: Scenario, { size, deepPages }: Dataset): TrafficPart[] {
  const list: TrafficPart = { kind: 'get', paths: ['/v1/pets?limit=20'] };
  const listStatus: TrafficPart = {
    kind: 'get',
    paths: STATUSES.map((s) => `/v1/pets?limit=20&status=${s}`),
  };
  const page: TrafficPart = { kind: 'get', paths: deepPages };
  const get: TrafficPart = {
    kind: 'get',
    paths: Array.from({ length: SAMPLES }, () => `/v1/pets/${1 + Math.floor(Math.random() * size)}`),
  };
  switch (scenario) {
    case 'list':
      return [list];
    case 'list-status':
      return [listStatus];
    case 'page':
      return [page];
    case 'get':
      return [get];
    case 'create':
    // The same creates, with one webhook endpoint registered (bench/run.ts): each create's event and
    // delivery row ride its commit, and the delivery is made off the request path.
    case 'create-with-webhook':
    case 'create-at-endpoint-limit':
      return [{ kind: 'create' }];
    case 'place-order':
      return [{ kind: 'place' }];
    case 'list-orders':
      // Half unfiltered or by status, half the orders of one animal (most have none, as in a store).
      return [
        {
          kind: 'get',
          paths: [
            '/v1/store/orders?limit=20',
            ...ORDER_STATUSES.map((s) => `/v1/store/orders?limit=20&status=${s}`),
          ],
          upTo: 50,
        },
        {
          kind: 'get',
          paths: Array.from(
            { length: SAMPLES },
            () => `/v1/store/orders?limit=20&petId=${1 + Math.floor(Math.random() * size)}`,
          ),
        },
      ];
    case 'mixed':
      // 80% reads (listing, filtered, paging), 15% creates, 5% gets.
      return [
        { kind: 'get', paths: [...list.paths, ...listStatus.paths, ...deepPages.slice(0, 100)], upTo: 80 },
        { kind: 'create', upTo: 95 },
        { ...get, upTo: 100 },
      ];
  }
}
