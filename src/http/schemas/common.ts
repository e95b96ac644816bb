import { type Static, type TSchema, Type } from 'typebox';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, MAX_SELECTED_IDS } from '../../domain/paging.js';

/** What every resource's schemas are built from: shared references, exact integers, paging parameters. */

/** A shared schema, referenced by `$ref` so it appears once, by name, in the OpenAPI components. */
export const ref = <T extends TSchema>(schema: T) =>
  Type.Unsafe<Static<T>>({ $ref: `${(schema as { $id?: string }).$id}#` });

/** int64 values are bigints in the code: the body parser and validator never round them. */
export const Int64 = (options: { description: string; minimum?: number }) =>
  Type.Unsafe<bigint>({ type: 'integer', format: 'int64', ...options });

/** A list's `limit`: 1 to 100, 20 by default. */
export const Limit = (what: string) =>
  Type.Integer({
    minimum: 1,
    maximum: MAX_PAGE_SIZE,
    default: DEFAULT_PAGE_SIZE,
    description: `Maximum number of ${what} to return.`,
  });

/** A list's `cursor`: opaque, from a previous page's `next` link. */
export const Cursor = () =>
  Type.String({
    minLength: 1,
    maxLength: 256,
    description:
      'Opaque position from a previous page\'s `Link: rel="next"`; follow that link rather than building it.',
  });

/**
 * A list's `id` filter: up to 100 ids, the parameter repeated (`?id=3&id=17`), int64 exact. It combines
 * with the other filters and pages like them: at most `limit` per page, the rest behind `next`.
 */
export const SelectedIds = (what: string) =>
  Type.Array(Int64({ description: `The id of one of the ${what} (1 to 2^63-1).`, minimum: 1 }), {
    minItems: 1,
    maxItems: MAX_SELECTED_IDS,
    description:
      `Only the ${what} with these ids; repeat the parameter (\`?id=3&id=17\`), up to ${MAX_SELECTED_IDS} times. ` +
      `The answer holds those that exist, ascending; an id that does not exist is simply absent (no 404). ` +
      'Combines with the other filters. Paged like any filter: at most `limit` per page (give `limit` as ' +
      'large as the number of ids to have them all in one answer), the rest behind `Link: rel="next"`, whose ' +
      'cursor is good only for the same ids.',
  });
