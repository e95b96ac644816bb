/** A paging cursor that this service did not issue, or issued for a different filter. */
export class InvalidCursorError extends Error {
  override readonly name = 'InvalidCursorError';
}
