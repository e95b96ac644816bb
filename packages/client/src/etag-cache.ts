/**
 * The last answer of each GET that carried an ETag, kept to ask again with If-None-Match: while the
 * service answers 304 (no body), the answer given back is the one kept, so a re-read costs the service
 * a few bytes on the wire. Bounded: the least recently used entries go first.
 */
export class EtagCache {
  readonly #entries = new Map<string, { etag: string; status: number; headers: Headers; body: string }>();
  readonly #maxEntries: number;

  constructor(maxEntries: number) {
    this.#maxEntries = maxEntries;
  }

  /** Adds If-None-Match with the ETag kept for this GET, unless the caller set one. */
  prepare(request: Request): void {
    const kept = this.#entries.get(request.url);
    if (kept && !request.headers.has('if-none-match')) request.headers.set('if-none-match', kept.etag);
  }

  /** The answer to give back: the kept one for a 304, else this one (kept when it has an ETag). */
  async settle(request: Request, response: Response): Promise<Response> {
    const kept = this.#entries.get(request.url);
    if (response.status === 304 && kept) {
      this.#entries.delete(request.url); // touched: the most recently used again
      this.#entries.set(request.url, kept);
      // The kept answer, with what the 304 says now (its ETag, request id, rate-limit fields).
      const headers = new Headers(kept.headers);
      for (const [name, value] of response.headers) headers.set(name, value);
      // The body kept is the decoded text: the coding and length of the bytes once sent no longer apply.
      headers.delete('content-encoding');
      headers.delete('content-length');
      return new Response(kept.body, { status: kept.status, headers });
    }
    const etag = response.headers.get('etag');
    if (response.status !== 200 || etag === null) return response;
    const body = await response.clone().text();
    this.#entries.delete(request.url);
    this.#entries.set(request.url, { etag, status: response.status, headers: response.headers, body });
    if (this.#entries.size > this.#maxEntries)
      this.#entries.delete(this.#entries.keys().next().value as string);
    return response;
  }
}
