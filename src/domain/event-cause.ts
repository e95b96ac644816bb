/**
 * What caused a change, recorded with its event: the W3C `traceparent` of the request that made it, so
 * that the webhook deliveries of the event can link to that request's trace. It is read when the
 * change is asked for, in the request's own context (a create joins a group commit later, beside other
 * requests' creates). Undefined unless tracing is on: tracing sets, at start, where it is read from.
 */
let read: () => string | undefined = () => undefined;

export function eventCause(): string | undefined {
  return read();
}

export function readEventCauseFrom(reader: () => string | undefined): void {
  read = reader;
}
