import type { OrderStatus } from '../../domain/order.js';
import type { PetStatus } from '../../domain/pet.js';

/**
 * Every link the service emits (Location, Link next, the deprecation link). docs/api.md: absolute
 * when PUBLIC_BASE_URL is set, path-absolute (`/v1/...`) otherwise.
 */
export class Links {
  readonly #api: string;
  readonly #docs: string;

  constructor(publicBaseUrl: string | undefined) {
    this.#api = publicBaseUrl ?? '/v1';
    // The docs page sits beside the versioned API, not under it.
    this.#docs = publicBaseUrl ? new URL('../docs', `${publicBaseUrl}/`).href : '/docs';
  }

  pet(id: bigint): string {
    return `${this.#api}/pets/${id}`;
  }

  /**
   * The `next` page of a walk, keeping the caller's limit and filter. Written out rather than built
   * with URLSearchParams: every part is URL-safe as it is (a number, a status name, a base64url
   * cursor), and this runs on every page served.
   */
  petsPage(limit: number, status: PetStatus | undefined, cursor: string, ids?: readonly bigint[]): string {
    return `${this.#api}/pets?limit=${limit}${status ? `&status=${status}` : ''}${idParameters(ids)}&cursor=${cursor}`;
  }

  order(id: bigint): string {
    return `${this.#api}/store/orders/${id}`;
  }

  /** The `next` page of a walk through the orders, keeping the caller's limit and filters. */
  ordersPage(
    limit: number,
    {
      status,
      petId,
      ids,
    }: { status: OrderStatus | undefined; petId: bigint | undefined; ids?: readonly bigint[] | undefined },
    cursor: string,
  ): string {
    return `${this.#api}/store/orders?limit=${limit}${status ? `&status=${status}` : ''}${petId === undefined ? '' : `&petId=${petId}`}${idParameters(ids)}&cursor=${cursor}`;
  }

  /** The `next` page of the event feed: after the page's last id, same limit and types. */
  eventsPage(limit: number, types: readonly string[], after: bigint): string {
    return `${this.#api}/events?limit=${limit}${types.map((type) => `&type=${type}`).join('')}&after=${after}`;
  }

  webhookEndpoint(id: bigint): string {
    return `${this.#api}/webhook-endpoints/${id}`;
  }

  webhookEndpointsPage(limit: number, cursor: string): string {
    return `${this.#api}/webhook-endpoints?limit=${limit}&cursor=${cursor}`;
  }

  webhookDeliveriesPage(
    endpointId: bigint,
    limit: number,
    status: string | undefined,
    cursor: string,
  ): string {
    return `${this.#api}/webhook-endpoints/${endpointId}/deliveries?limit=${limit}${status ? `&status=${status}` : ''}&cursor=${cursor}`;
  }

  webhookAttemptsPage(endpointId: bigint, eventId: bigint, limit: number, cursor: string): string {
    return `${this.#api}/webhook-endpoints/${endpointId}/deliveries/${eventId}/attempts?limit=${limit}&cursor=${cursor}`;
  }

  /** Documentation of listPets, getPet's replacement. */
  listPetsDocs(): string {
    return `${this.#docs}#/pets/listPets`;
  }
}

/** Selected ids as the next page repeats them: `&id=3&id=17`. */
const idParameters = (ids: readonly bigint[] | undefined): string =>
  ids === undefined ? '' : ids.map((id) => `&id=${id}`).join('');

/** An RFC 8288 Link header value. */
export const linkHeader = (href: string, rel: string, type?: string): string =>
  `<${href}>; rel="${rel}"${type ? `; type="${type}"` : ''}`;
