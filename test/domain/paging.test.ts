import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidCursorError } from '../../src/domain/errors.js';
import { CursorCodec } from '../../src/domain/paging.js';

const SECRET = Buffer.alloc(32, 7);
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const INT64_MAX = 2n ** 63n - 1n;

const isInvalidCursor = (error: unknown) => {
  assert.ok(error instanceof InvalidCursorError, `expected InvalidCursorError, got ${String(error)}`);
  return true;
};

/** Every decode of `cursor` that did not throw InvalidCursorError, to list in a failure message. */
function accepted(codec: CursorCodec, cursors: string[], status: 'sold' | undefined): string[] {
  const passed: string[] = [];
  for (const cursor of cursors) {
    try {
      codec.decode(cursor, { status: status });
      passed.push(cursor);
    } catch (error) {
      assert.ok(error instanceof InvalidCursorError, `${cursor}: threw ${String(error)}`);
    }
  }
  return passed;
}

describe('CursorCodec', () => {
  const codec = new CursorCodec(SECRET);

  test('when a cursor is made with a status filter, then it decodes to the same position and status', () => {
    const cursor = codec.encode({ afterId: 42n, status: 'sold' });
    assert.deepEqual(codec.decode(cursor, { status: 'sold' }), { afterId: 42n, status: 'sold' });
  });

  test('when a cursor is made without a status filter, then it decodes to the same position and no status', () => {
    const cursor = codec.encode({ afterId: 7n, status: undefined });
    assert.deepEqual(codec.decode(cursor, { status: undefined }), { afterId: 7n, status: undefined });
  });

  test('when a cursor holds the largest int64 id, then it decodes to exactly that id', () => {
    for (const status of ['available', 'pending', 'sold', undefined] as const) {
      const cursor = codec.encode({ afterId: INT64_MAX, status });
      assert.deepEqual(codec.decode(cursor, { status: status }), { afterId: INT64_MAX, status });
    }
  });

  test('when a cursor is made, then it is opaque URL-safe text that does not show the id in the clear', () => {
    const cursor = codec.encode({ afterId: 123456789n, status: 'pending' });
    assert.match(cursor, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    assert.equal(cursor.includes('123456789'), false);
    assert.equal(encodeURIComponent(cursor), cursor);
  });

  test("when a cursor made for status 'sold' is used for 'available', then it is refused", () => {
    const cursor = codec.encode({ afterId: 42n, status: 'sold' });
    assert.throws(() => codec.decode(cursor, { status: 'available' }), isInvalidCursor);
  });

  test("when a cursor made for status 'sold' is used without a status, then it is refused", () => {
    const cursor = codec.encode({ afterId: 42n, status: 'sold' });
    assert.throws(() => codec.decode(cursor, { status: undefined }), isInvalidCursor);
  });

  test("when a cursor made without a status is used for 'sold', then it is refused", () => {
    const cursor = codec.encode({ afterId: 42n, status: undefined });
    assert.throws(() => codec.decode(cursor, { status: 'sold' }), isInvalidCursor);
  });

  test('when any single character of a cursor is changed, then the cursor is refused', () => {
    const cursor = codec.encode({ afterId: 42n, status: 'sold' });
    const tampered: string[] = [];
    for (let i = 0; i < cursor.length; i++) {
      for (const replacement of `${BASE64URL}.+/=`) {
        if (replacement !== cursor[i]) tampered.push(cursor.slice(0, i) + replacement + cursor.slice(i + 1));
      }
    }
    assert.equal(tampered.length, cursor.length * 67);
    assert.deepEqual(accepted(codec, tampered, 'sold'), [], `tampered cursors accepted (original ${cursor})`);
  });

  test('when characters are appended to or removed from a cursor, then the cursor is refused', () => {
    const cursor = codec.encode({ afterId: 42n, status: 'sold' });
    const variants = [
      `${cursor}A`,
      `${cursor}=`,
      `${cursor}==`,
      `${cursor} `,
      `${cursor}.`,
      `${cursor}.x`,
      ` ${cursor}`,
      `A${cursor}`,
      cursor.slice(1),
      cursor.slice(0, -1),
    ];
    assert.deepEqual(accepted(codec, variants, 'sold'), [], `altered cursors accepted (original ${cursor})`);
  });

  test('when a cursor was made with a different secret, then it is refused', () => {
    const foreign = new CursorCodec(Buffer.alloc(32, 8)).encode({ afterId: 42n, status: 'sold' });
    assert.notEqual(foreign, codec.encode({ afterId: 42n, status: 'sold' }));
    assert.throws(() => codec.decode(foreign, { status: 'sold' }), isInvalidCursor);
  });

  test('when a cursor is made with a status and a petId filter, then it decodes only with both the same', () => {
    const orders = new CursorCodec(SECRET, 'orders');
    const cursor = orders.encode({ afterId: 42n, status: 'placed', petId: INT64_MAX });
    assert.deepEqual(orders.decode(cursor, { status: 'placed', petId: INT64_MAX }), {
      afterId: 42n,
      status: 'placed',
      petId: INT64_MAX,
    });
    for (const other of [
      { status: 'placed', petId: 7n },
      { status: 'placed', petId: undefined },
      { status: undefined, petId: INT64_MAX },
      { status: 'delivered', petId: INT64_MAX },
    ]) {
      assert.throws(() => orders.decode(cursor, other), isInvalidCursor, JSON.stringify(String(other.petId)));
    }
  });

  test('when a cursor of one scope is used in another, then it is refused even with the same filters', () => {
    const orders = new CursorCodec(SECRET, 'orders');
    for (const filter of [{ status: undefined }, { status: 'sold' }]) {
      assert.throws(() => orders.decode(codec.encode({ afterId: 1n, ...filter }), filter), isInvalidCursor);
      assert.throws(() => codec.decode(orders.encode({ afterId: 1n, ...filter }), filter), isInvalidCursor);
    }
  });

  test('when a cursor is overlong, then it is refused', () => {
    const valid = codec.encode({ afterId: 42n, status: 'sold' });
    const [payload, tag] = valid.split('.') as [string, string];
    for (const overlong of [
      'A'.repeat(10_000),
      `${'A'.repeat(300)}.${tag}`,
      `${payload}${'A'.repeat(300)}.${tag}`,
      `${payload}.${tag}${'A'.repeat(300)}`,
    ]) {
      assert.throws(() => codec.decode(overlong, { status: 'sold' }), isInvalidCursor);
    }
  });

  test('when a cursor is garbage, then it is refused with InvalidCursorError', () => {
    for (const garbage of [
      '',
      '.',
      '..',
      'abc',
      '.abc',
      'abc.',
      'a.b.c',
      '!!!.???',
      '😀.😀',
      '42',
      'null',
      '%00.%00',
      Buffer.from('42:sold').toString('base64url'),
      `${Buffer.from('42:sold').toString('base64url')}.${'A'.repeat(22)}`,
    ]) {
      assert.throws(
        () => codec.decode(garbage, { status: 'sold' }),
        isInvalidCursor,
        JSON.stringify(garbage),
      );
      assert.throws(
        () => codec.decode(garbage, { status: undefined }),
        isInvalidCursor,
        JSON.stringify(garbage),
      );
    }
  });

  test('when cursors are made, then they are exactly the ones issued before (a change would break every walk in progress)', () => {
    const orders = new CursorCodec(SECRET, 'orders');
    assert.equal(codec.encode({ afterId: 42n, status: 'sold' }), 'NDI6c29sZA.b55h93_tHJWaDRFrd7XwNw');
    assert.equal(codec.encode({ afterId: 42n }), 'NDI6.kN1VZjmHam043YGZlGYgyg');
    assert.equal(
      orders.encode({ afterId: 42n, status: 'placed', petId: 7n }),
      'NDI6cGxhY2VkOjc.JhGk0K5M3ccTsX9IRsQwqw',
    );
    assert.equal(orders.encode({ afterId: 42n, petId: 7n }), 'NDI6Ojc.dmtMXG3DRnvi_AacFCG7yA');
    assert.deepEqual(orders.decode('NDI6Ojc.dmtMXG3DRnvi_AacFCG7yA', { petId: 7n }), {
      afterId: 42n,
      petId: 7n,
    });
  });

  test('when a cursor is issued for selected ids, then it is good for the same set however spelt, and refused for another set or none', () => {
    const position = codec.decode(codec.encode({ afterId: 3n, ids: [5n, 3n, 9n] }), {
      ids: [9n, 3n, 5n, 5n],
    });
    assert.equal(position.afterId, 3n);
    for (const other of [{ ids: [3n, 5n] }, { ids: [3n, 5n, 9n, 10n] }, {}]) {
      assert.throws(() => codec.decode(codec.encode({ afterId: 3n, ids: [5n, 3n, 9n] }), other), {
        message: 'cursor does not belong to these filters',
      });
    }
    assert.throws(() => codec.decode(codec.encode({ afterId: 3n }), { ids: [3n] }), {
      message: 'cursor does not belong to these filters',
    });
  });

  test('when a cursor is refused, then the message says why: not valid, or issued for other filters', () => {
    const orders = new CursorCodec(SECRET, 'orders');
    assert.throws(() => codec.decode('abc', {}), {
      name: 'InvalidCursorError',
      message: 'cursor is not valid',
    });
    assert.throws(() => codec.decode(`${codec.encode({ afterId: 1n })}x`, {}), {
      message: 'cursor is not valid',
    });
    assert.throws(() => codec.decode(codec.encode({ afterId: 1n, status: 'sold' }), {}), {
      message: 'cursor does not belong to these filters',
    });
    assert.throws(() => orders.decode(orders.encode({ afterId: 1n, petId: 2n }), {}), {
      message: 'cursor does not belong to these filters',
    });
  });

  test('when a cursor is as long as a valid one can be (255 characters; 256 cannot be base64url), then it is accepted', () => {
    const longest = codec.encode({ afterId: BigInt('9'.repeat(169)), status: 'sold' });
    assert.equal(longest.length, 255);
    assert.deepEqual(codec.decode(longest, { status: 'sold' }), {
      afterId: BigInt('9'.repeat(169)),
      status: 'sold',
    });
    const over = codec.encode({ afterId: BigInt('9'.repeat(170)), status: 'sold' });
    assert.equal(over.length, 257);
    assert.throws(() => codec.decode(over, { status: 'sold' }), { message: 'cursor is not valid' });
  });
});
