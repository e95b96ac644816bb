import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ApiKeyVerifier } from '../../domain/api-keys.js';
import { eventJson, type StoredEvent } from '../../domain/events.js';
import type { EventSink, FollowQuery, LiveEvents } from '../../domain/live-events.js';
import type { TokenBucketPolicy, TokenBuckets } from '../../domain/token-bucket.js';
import { currentReadScope, runInReadScope } from '../../storage/postgres/read-scope.js';
import { DRAIN_GRACE_MS, type GuardedServer } from '../connection/connections.js';
import { ApiError, unavailable } from '../request/errors.js';
import { LocalStreamSlots, type StreamSlots } from './stream-slots.js';

/** What an EventSource client waits before reconnecting after the stream broke (the first message). */
export const RETRY_MS = 2_000;
/** How often a comment goes out on every stream: proxies keep the connection, clients notice a dead one. */
export const KEEP_ALIVE_MS = 10_000;
/**
 * How often the keys of open streams are asked again whether they are live: half the 2 s within which a
 * revoked or expired key is refused everywhere (KEY_CACHE_TTL_MS), so the read has the other half.
 */
export const KEY_CHECK_MS = 1_000;

const KEEP_ALIVE = ': keep-alive\n\n';

/** A stream's content type, by which the request metrics know a stream from a request (metrics.ts). */
export const EVENT_STREAM_TYPE = 'text/event-stream; charset=utf-8';

export interface EventStreamOptions {
  live: LiveEvents;
  server: GuardedServer;
  registry: Registry;
  /** Bytes a stream may leave unsent before it is closed (EVENT_STREAM_BUFFER_BYTES). */
  bufferBytes: number;
  /** Streams one API key may have open on this node (EVENT_STREAM_MAX_PER_KEY). */
  maxPerKey: number;
  /** Where those are counted: this process's own count unless given (a worker asks its primary). */
  slots?: StreamSlots | undefined;
  /** Asked every KEY_CHECK_MS whether the keys of open streams are still live. */
  verifier: Pick<ApiKeyVerifier, 'stillLive'>;
  /** The keys' rate limits, charged one request per page a stream catches up by; undefined when off. */
  rateLimit?: { buckets: TokenBuckets; policy: TokenBucketPolicy } | undefined;
  /** How often a comment goes out on every stream (KEEP_ALIVE_MS unless a test wants it sooner). */
  keepAliveMs?: number;
}

type CloseReason = 'client' | 'slow' | 'shutdown' | 'error' | 'revoked';

/**
 * One event as a Server-Sent Events message (HTML standard, 9.2): its id, its type as the event name,
 * and the Event JSON as getEvent sends it. That JSON is one line (JSON escapes line breaks inside
 * strings); were it ever not, each line would be a `data:` field of its own, which a client joins
 * back with LF, so no byte of it can end the message early or start a field.
 */
function message(event: StoredEvent): string {
  const json = eventJson(event);
  const data = /[\r\n]/.test(json) ? json.split(/\r\n|\r|\n/).join('\ndata: ') : json;
  return `id: ${event.id}\nevent: ${event.type}\ndata: ${data}\n\n`;
}

/**
 * The live event streams of this node (`GET /v1/events` with `Accept: text/event-stream`). Events
 * come from LiveEvents, one read of the log for every stream; each stream is a response kept open.
 * A stream whose client does not read is closed once EVENT_STREAM_BUFFER_BYTES wait unsent (the client
 * resumes with Last-Event-ID), so a stalled reader costs the node at most that; one that has read
 * nothing since the keep-alive before last while bytes wait for it (it stalled while catching up, a
 * page at a time) is closed too. When the server drains, every stream ends at once: none holds a
 * shutdown back past the drain's grace. A stream whose key is revoked or expires ends within 2 s.
 */
export class EventStreams {
  readonly #o: EventStreamOptions;
  readonly #open = new Set<EventStream>();
  readonly #slots: StreamSlots;
  /** Each event's message is written once per node, whatever the number of streams sending it. */
  readonly #messages = new WeakMap<StoredEvent, string>();
  readonly #sent: Counter;
  readonly #closed: Counter<'reason'>;
  #keepAlive: NodeJS.Timeout | undefined;
  #keyCheck: NodeJS.Timeout | undefined;
  #checkingKeys = false;

  constructor(options: EventStreamOptions) {
    this.#o = options;
    this.#slots = options.slots ?? new LocalStreamSlots(options.maxPerKey);
    const open = this.#open;
    new Gauge({
      name: 'petstore_event_streams',
      help: 'Live event streams (GET /v1/events as text/event-stream) open now.',
      registers: [options.registry],
      collect() {
        this.set(open.size);
      },
    });
    this.#sent = new Counter({
      name: 'petstore_event_stream_messages_total',
      help: 'Events sent on live event streams (one per stream that sent it).',
      registers: [options.registry],
    });
    this.#closed = new Counter({
      name: 'petstore_event_streams_closed_total',
      help: 'Live event streams closed, by reason: client (it went away), slow (EVENT_STREAM_BUFFER_BYTES unsent, or nothing read for two keep-alives), shutdown, error (the database did not answer), revoked (its key was revoked or expired).',
      labelNames: ['reason'],
      registers: [options.registry],
    });
    options.server.on('draining', () => this.closeAll());
  }

  /** Opens a stream as the answer to `request`; throws an ApiError (429, 503) when it may not open. */
  async open(request: FastifyRequest, reply: FastifyReply, query: FollowQuery): Promise<void> {
    if (this.#o.server.draining) throw unavailable('this node is shutting down; connect again');
    const res = reply.raw;
    // The client went away while its key was looked up, its rate limit asked or its slot counted:
    // nothing to open, and no slot to keep (its 'close' has come and gone, and would never give one back).
    const gone = () => res.destroyed || request.raw.socket.destroyed;
    if (gone()) {
      reply.hijack();
      return;
    }
    const key = request.apiKeyHash;
    if (!(await this.#slots.take(key)))
      throw new ApiError(
        'rate_limited',
        `too many event streams for this API key: at most ${this.#o.maxPerKey} open at once on a node`,
      );
    if (gone()) {
      this.#slots.give(key);
      reply.hijack();
      return;
    }
    // Answered here, not by Fastify: the headers set so far (request id, rate limits, CORS) go with it.
    reply.hijack();
    res.setHeader('content-type', EVENT_STREAM_TYPE);
    res.writeHead(200, {
      ...(reply.getHeaders() as Record<string, string>),
      'content-type': EVENT_STREAM_TYPE,
      // Neither a cache nor a buffering proxy (nginx's X-Accel-Buffering) may hold messages back.
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
    });
    res.write(`retry: ${RETRY_MS}\n\n`);
    const stream = new EventStream(this, res, key);
    this.#open.add(stream);
    this.#startTimers();
    res.once('close', () => {
      stream.following.close();
      this.#open.delete(stream);
      this.#slots.give(key);
      this.#closed.inc({ reason: stream.closedFor ?? 'client' });
      if (this.#open.size === 0) this.#stopTimers();
    });
    // On the primary: the node's reads for its streams are woken by the primary's commits and read
    // there. Catching up reads its full pages where LiveEvents' catchUpStore says (a replica may serve
    // them), and ends on the primary.
    const follow = () => this.#o.live.follow(query, stream);
    stream.following = currentReadScope()
      ? runInReadScope({ key: request.apiKeyHash, replicaReads: false }, follow)
      : follow();
  }

  #startTimers(): void {
    if (this.#keepAlive) return;
    this.#keepAlive = setInterval(() => {
      for (const open of this.#open) open.keepAlive();
    }, this.#o.keepAliveMs ?? KEEP_ALIVE_MS);
    this.#keepAlive.unref();
    this.#keyCheck = setInterval(() => void this.#checkKeys(), KEY_CHECK_MS);
    this.#keyCheck.unref();
  }

  #stopTimers(): void {
    clearInterval(this.#keepAlive);
    clearInterval(this.#keyCheck);
    this.#keepAlive = undefined;
    this.#keyCheck = undefined;
  }

  /** Ends the streams whose key is no longer live (revoked on any node, or expired). */
  async #checkKeys(): Promise<void> {
    if (this.#checkingKeys || this.#open.size === 0) return;
    this.#checkingKeys = true;
    try {
      const live = await this.#o.verifier.stillLive(new Set([...this.#open].map((stream) => stream.key)));
      for (const stream of this.#open) if (!live.has(stream.key)) stream.end('revoked');
    } catch {
      // The database did not answer: the streams' own reads fail and end them; a key is asked again.
    } finally {
      this.#checkingKeys = false;
    }
  }

  /**
   * Waits until `key` may read one more page: one request of its rate limit, as the feed's page
   * would cost. A limiter that fails lets it through, as it does a request.
   */
  async paced(key: string, open: () => boolean): Promise<void> {
    const limit = this.#o.rateLimit;
    if (!limit) return;
    while (open()) {
      let decision: Awaited<ReturnType<TokenBuckets['take']>>;
      try {
        decision = await limit.buckets.take(key, limit.policy);
      } catch {
        return;
      }
      if (decision.allowed) return;
      await new Promise((resolve) => setTimeout(resolve, Math.ceil(1000 / limit.policy.perSecond)).unref());
    }
  }

  /** Ends every stream cleanly (the server drains, or the app closes). */
  closeAll(): void {
    for (const stream of this.#open) stream.end('shutdown');
  }

  get bufferBytes(): number {
    return this.#o.bufferBytes;
  }

  messageOf(event: StoredEvent): string {
    let text = this.#messages.get(event);
    if (text === undefined) {
      text = message(event);
      this.#messages.set(event, text);
    }
    return text;
  }

  counted(messages: number): void {
    this.#sent.inc(messages);
  }
}

class EventStream implements EventSink {
  following: { close(): void } = { close: () => undefined };
  closedFor: CloseReason | undefined;
  readonly #streams: EventStreams;
  readonly #res: ServerResponse;
  /** Times its unsent bytes drained; a keep-alive that finds no change while bytes wait, twice, closes it. */
  #drains = 0;
  #drainsAtLastKeepAlive = -1;

  constructor(
    streams: EventStreams,
    res: ServerResponse,
    readonly key: string,
  ) {
    this.#streams = streams;
    this.#res = res;
    res.on('drain', () => this.#drains++);
  }

  send(events: readonly StoredEvent[]): void {
    if (this.closedFor) return;
    let text = '';
    for (const event of events) text += this.#streams.messageOf(event);
    this.write(text);
    this.#streams.counted(events.length);
  }

  write(text: string): void {
    if (this.closedFor || this.#res.destroyed) return;
    this.#res.write(text);
    // Past the bound the client is not reading: close rather than hold more (it resumes from its last id).
    if (this.#res.writableLength > this.#streams.bufferBytes) this.#closeSlow();
  }

  /**
   * A comment, so proxies keep the connection; and the stalled-reader check. While catching up, a
   * stream waits for its client between pages, so a client that stopped reading never reaches
   * EVENT_STREAM_BUFFER_BYTES: it is closed once bytes have waited from one keep-alive to the next
   * with nothing read.
   */
  keepAlive(): void {
    const stalled = this.#res.writableNeedDrain && this.#drains === this.#drainsAtLastKeepAlive;
    this.#drainsAtLastKeepAlive = this.#res.writableNeedDrain ? this.#drains : -1;
    if (stalled) this.#closeSlow();
    else this.write(KEEP_ALIVE);
  }

  #closeSlow(): void {
    this.closedFor = 'slow';
    this.following.close();
    this.#res.destroy();
  }

  async drained(): Promise<void> {
    const res = this.#res;
    if (res.writableNeedDrain && !res.destroyed)
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    await this.#streams.paced(this.key, () => !this.closedFor && !res.destroyed);
  }

  failed(): void {
    this.end('error');
  }

  /** `after=now`: the position, as a message with an id and no data, which a client records and does not dispatch. */
  startsAfter(id: bigint): void {
    this.write(`id: ${id}\n\n`);
  }

  /**
   * Ends the response, and its connection: a client reconnects, to this node or another. What is
   * still unsent gets the drain's grace to go out; a client that does not read it is cut off then.
   */
  end(reason: CloseReason): void {
    if (this.closedFor) return;
    this.closedFor = reason;
    this.following.close();
    // Closed once the end is flushed: a keep-alive client would otherwise hold the connection for the
    // drain's grace, and the node's exit with it.
    const socket = this.#res.socket;
    const cutOff = setTimeout(() => socket?.destroy(), DRAIN_GRACE_MS);
    cutOff.unref();
    this.#res.once('close', () => clearTimeout(cutOff));
    this.#res.end(() => socket?.destroy());
  }
}
