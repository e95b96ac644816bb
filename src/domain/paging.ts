import { createHash, createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';
import { InvalidCursorError } from './errors.js';

/** The contract's page sizes, for every list: `limit` defaults to 20 and may not exceed 100. */
export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;
/** How many ids one list request may select (`?id=3&id=17`): a page's worth. */
export const MAX_SELECTED_IDS = 100;

/** The filters a walk was started with: a cursor is good only with the same ones. */
export interface CursorFilter {
  status?: string | undefined;
  petId?: bigint | undefined;
  /** The ids selected (`?id=…`), in any order, repeats allowed: the cursor binds the set. */
  ids?: readonly bigint[] | undefined;
}

/** Where a page ends: the keyset position (last id seen) and the filters the walk was started with. */
export interface CursorPosition extends CursorFilter {
  afterId: bigint;
}

const MAX_CURSOR_LENGTH = 256;
const TAG_BYTES = 16;

/**
 * The filters as the cursor's payload carries them: `status` always, `petId` when given, and for
 * selected ids a digest of the set (up to 100 ids would not fit in a cursor), so a cursor is good only
 * for the same set. Cursors issued before ids could be selected read the same as before.
 */
const filterText = ({ status, petId, ids }: CursorFilter): string => {
  const text = petId === undefined ? (status ?? '') : `${status ?? ''}:${petId}`;
  return ids === undefined ? text : `${text}:ids=${idSetDigest(ids)}`;
};

/** The selected ids, sorted, each once: the same set however the request spelt it. */
export const idSet = (ids: readonly bigint[]): bigint[] =>
  [...new Set(ids)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

const idSetDigest = (ids: readonly bigint[]): string =>
  createHash('sha256').update(idSet(ids).join(',')).digest().subarray(0, 12).toString('base64url');

/**
 * Keyset cursors, opaque to clients and signed with HMAC-SHA256 so a tampered or foreign cursor is
 * refused instead of silently paging from somewhere else. The secret is shared by every node (it lives
 * in the database), so a cursor issued by one node is good on any other. Each resource pages with a
 * codec of its own `scope`, whose key is derived from the secret: a cursor of one list is refused by
 * another, even with the same filters.
 */
export class CursorCodec {
  // A KeyObject, imported once: HMAC with a raw Buffer imports the key again on every call.
  readonly #secret: KeyObject;

  /** `scope` '' (the pets list) signs with the secret itself, as cursors were signed before orders. */
  constructor(secret: Buffer, scope = '') {
    this.#secret = createSecretKey(
      scope === '' ? secret : createHmac('sha256', secret).update(`cursor scope: ${scope}`).digest(),
    );
  }

  encode(position: CursorPosition): string {
    const payload = Buffer.from(`${position.afterId}:${filterText(position)}`).toString('base64url');
    return `${payload}.${this.#tag(payload)}`;
  }

  /** Throws InvalidCursorError unless the cursor is one of ours, of this scope, for the same filters. */
  decode(cursor: string, filter: CursorFilter): CursorPosition {
    const dot = cursor.indexOf('.');
    if (cursor.length > MAX_CURSOR_LENGTH || dot < 1) throw new InvalidCursorError('cursor is not valid');
    const payload = cursor.slice(0, dot);
    // Compared as text: base64url decoding ignores the spare bits of the last character, so comparing
    // decoded bytes would accept a cursor with that character altered.
    const tag = Buffer.from(cursor.slice(dot + 1));
    const expected = Buffer.from(this.#tag(payload));
    if (tag.length !== expected.length || !timingSafeEqual(tag, expected)) {
      throw new InvalidCursorError('cursor is not valid');
    }
    const text = Buffer.from(payload, 'base64url').toString();
    const colon = text.indexOf(':');
    if (text.slice(colon + 1) !== filterText(filter)) {
      throw new InvalidCursorError('cursor does not belong to these filters');
    }
    return { afterId: BigInt(text.slice(0, colon)), ...filter };
  }

  #tag(payload: string): string {
    return createHmac('sha256', this.#secret)
      .update(payload)
      .digest()
      .subarray(0, TAG_BYTES)
      .toString('base64url');
  }
}
