import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';
import { InvalidCursorError } from './errors.js';
import type { PetStatus } from './pet.js';

/** Where a page ends: the keyset position (last id seen) and the filter the walk was started with. */
export interface CursorPosition {
  afterId: bigint;
  status: PetStatus | undefined;
}

const MAX_CURSOR_LENGTH = 256;
const TAG_BYTES = 16;

/**
 * Keyset cursors, opaque to clients and signed with HMAC-SHA256 so a tampered or foreign cursor is
 * refused instead of silently paging from somewhere else. The secret is shared by every node (it lives
 * in the database), so a cursor issued by one node is good on any other.
 */
export class CursorCodec {
  // A KeyObject, imported once: HMAC with a raw Buffer imports the key again on every call.
  readonly #secret: KeyObject;

  constructor(secret: Buffer) {
    this.#secret = createSecretKey(secret);
  }

  encode(position: CursorPosition): string {
    const payload = Buffer.from(`${position.afterId}:${position.status ?? ''}`).toString('base64url');
    return `${payload}.${this.#tag(payload)}`;
  }

  /** Throws InvalidCursorError unless the cursor is one of ours, for the same status filter. */
  decode(cursor: string, status: PetStatus | undefined): CursorPosition {
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
    const [afterId = '', cursorStatus = ''] = Buffer.from(payload, 'base64url').toString().split(':');
    if (cursorStatus !== (status ?? '')) {
      throw new InvalidCursorError('cursor does not belong to this status filter');
    }
    return { afterId: BigInt(afterId), status };
  }

  #tag(payload: string): string {
    return createHmac('sha256', this.#secret)
      .update(payload)
      .digest()
      .subarray(0, TAG_BYTES)
      .toString('base64url');
  }
}
