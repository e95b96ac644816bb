import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import type { Agent, Dispatcher, errors } from 'undici';

/** What a delivery needs of undici (loaded on first use). */
interface Client {
  errors: typeof errors;
  Agent: typeof Agent;
}

/**
 * Connection pools kept at once, one per endpoint: more than WEBHOOK_MAX_ENDPOINTS allows, so only a
 * deleted endpoint's pool is ever closed for room (the least recently used goes first).
 */
const MAX_POOLS = 256;

interface Target {
  href: string;
  target: URL;
  /** Why the URL's literal address may not be connected to; undefined when it may. */
  refused: string | undefined;
}

interface Pool {
  agent: Agent;
  url: Target | undefined;
}

import type { NetworkPolicy } from '../domain/network-policy.js';
import { VERSION } from '../version.js';

/** At most this much of a receiver's answer is read and kept (for a delivery's lastError). */
export const MAX_ANSWER_BYTES = 1024;
export const USER_AGENT = `animal-store-webhooks/${VERSION}`;

/** How one POST ended: the receiver's status and the start of its answer, or what went wrong. */
export type SendResult =
  | { answered: true; status: number; body: string }
  | { answered: false; error: string };

/** A host that resolves only to addresses webhooks may not reach. */
class RefusedAddressError extends Error {
  readonly code = 'EREFUSEDADDRESS';
}

/**
 * DNS resolution that leaves out every address the policy refuses: the socket then connects only to
 * a permitted address (the one judged is the one connected to, so re-binding a name between a check
 * and the connection gains nothing). A name with no permitted address fails without connecting.
 */
function guardedLookup(policy: NetworkPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, '', 0);
      const permitted = addresses.filter((a) => policy.permits(a.address));
      const first = permitted[0];
      if (!first)
        return callback(new RefusedAddressError(`${hostname} resolves to no public address`), '', 0);
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, permitted);
      callback(null, first.address, first.family);
    });
  };
}

/**
 * POSTs webhook deliveries with undici (Node's own HTTP client): redirects never followed, the whole
 * exchange bounded by `timeoutMs`, at most 1 KiB of an answer read, and connections made only to
 * addresses the policy permits, literal or resolved.
 *
 * Each endpoint has a connection pool of its own, kept alive between deliveries, of at most
 * `connectionsPerEndpoint` connections. One pool per origin, as undici's Agent keeps, let a slow
 * endpoint hold every connection to its host, and another endpoint on that host waited behind it.
 */
export class WebhookSender {
  readonly #policy: NetworkPolicy;
  readonly #timeoutMs: number;
  readonly #connectionsPerEndpoint: number;
  /**
   * undici, loaded on the first delivery: a process that never delivers (a command-line tool, a node
   * with no endpoint) does not pay the 50 ms of loading it.
   */
  #client: Promise<Client> | undefined;
  /** Each endpoint's pool, least recently used first, with its URL as last judged. */
  readonly #pools = new Map<bigint, Pool>();

  constructor(
    policy: NetworkPolicy,
    { timeoutMs, connectionsPerEndpoint }: { timeoutMs: number; connectionsPerEndpoint: number },
  ) {
    this.#policy = policy;
    this.#timeoutMs = timeoutMs;
    this.#connectionsPerEndpoint = connectionsPerEndpoint;
  }

  #load(): Promise<Client> {
    this.#client ??= import('undici').then(({ Agent: UndiciAgent, errors }) => ({
      errors,
      Agent: UndiciAgent,
    }));
    return this.#client;
  }

  #pool(endpointId: bigint, { Agent: UndiciAgent }: Client): Pool {
    let pool = this.#pools.get(endpointId);
    if (pool) {
      this.#pools.delete(endpointId); // to the back: most recently used
    } else {
      pool = {
        agent: new UndiciAgent({
          connections: this.#connectionsPerEndpoint,
          connect: { lookup: guardedLookup(this.#policy), timeout: this.#timeoutMs },
          headersTimeout: this.#timeoutMs,
          bodyTimeout: this.#timeoutMs,
        }),
        url: undefined,
      };
      const [oldest] = this.#pools;
      if (oldest && this.#pools.size >= MAX_POOLS) {
        this.#pools.delete(oldest[0]);
        void oldest[1].agent.close().catch(() => undefined); // its requests under way finish first
      }
    }
    this.#pools.set(endpointId, pool);
    return pool;
  }

  /** The endpoint's URL parsed and judged once, not per attempt: a literal address must be permitted. */
  #target(pool: Pool, url: string): Target {
    if (pool.url?.href !== url) {
      const target = new URL(url);
      const host = target.hostname.startsWith('[') ? target.hostname.slice(1, -1) : target.hostname;
      // A literal address is connected to without any lookup: judged here.
      const refused =
        isIP(host) && !this.#policy.permits(host) ? `refused: ${host} is not a public address` : undefined;
      pool.url = { href: url, target, refused };
    }
    return pool.url;
  }

  async send(
    endpointId: bigint,
    url: string,
    headers: Record<string, string>,
    body: string,
  ): Promise<SendResult> {
    const client = await this.#load();
    const pool = this.#pool(endpointId, client);
    const { target, refused } = this.#target(pool, url);
    if (refused) return { answered: false, error: refused };
    return new Promise((resolve) => {
      const exchange = new Exchange(resolve, this.#timeoutMs, client.errors);
      // undici's dispatch with a handler of our own: no response stream, async iterator or AbortSignal
      // per attempt, which undici's request() makes (about a tenth of a delivery's CPU). No redirect is
      // followed: a dispatcher follows none unless asked to.
      pool.agent.dispatch(
        {
          origin: target.origin,
          path: `${target.pathname}${target.search}`,
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json', 'user-agent': USER_AGENT },
          body,
        },
        exchange,
      );
    });
  }

  /** Aborts what is under way (its attempts fail, their results are not recorded) and closes. */
  async destroy(): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((pool) => pool.agent.destroy()));
  }
}

/**
 * One attempt as undici's dispatch sees it: the status, the first MAX_ANSWER_BYTES of the answer (the
 * rest is never read: the connection is dropped), and the whole exchange bounded by `timeoutMs`.
 */
class Exchange implements Dispatcher.DispatchHandlers {
  readonly #resolve: (result: SendResult) => void;
  readonly #timeoutMs: number;
  readonly #errors: Client['errors'];
  readonly #timer: NodeJS.Timeout;
  #abort: ((error?: Error) => void) | undefined;
  #status = 0;
  readonly #chunks: Buffer[] = [];
  #length = 0;
  #settled = false;

  constructor(resolve: (result: SendResult) => void, timeoutMs: number, errors: Client['errors']) {
    this.#resolve = resolve;
    this.#timeoutMs = timeoutMs;
    this.#errors = errors;
    this.#timer = setTimeout(() => this.#timedOut(), timeoutMs).unref();
  }

  #timedOut(): void {
    const error = new Error(`no answer within ${this.#timeoutMs} ms`);
    this.#finish({ answered: false, error: error.message });
    this.#abort?.(error);
  }

  #finish(result: SendResult): void {
    if (this.#settled) return;
    this.#settled = true;
    clearTimeout(this.#timer);
    this.#resolve(result);
  }

  #answered(): SendResult {
    const body = Buffer.concat(this.#chunks).subarray(0, MAX_ANSWER_BYTES).toString('utf8');
    return { answered: true, status: this.#status, body };
  }

  onConnect(abort: (error?: Error) => void): void {
    this.#abort = abort;
    if (this.#settled) abort(); // timed out before the request was sent
  }

  onHeaders(statusCode: number): boolean {
    this.#status = statusCode; // a 1xx is followed by the final status
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.#chunks.push(chunk);
    this.#length += chunk.length;
    if (this.#length < MAX_ANSWER_BYTES) return true;
    this.#finish(this.#answered());
    this.#abort?.();
    return false;
  }

  onComplete(): void {
    this.#finish(this.#answered());
  }

  onError(error: Error): void {
    // An answer cut short after its status: what arrived is what there is.
    this.#finish(
      this.#status >= 200
        ? this.#answered()
        : { answered: false, error: describe(error, this.#timeoutMs, this.#errors) },
    );
  }
}

/** What went wrong with an attempt, in a few words for lastError. */
function describe(error: unknown, timeoutMs: number, errors: Client['errors']): string {
  if (error instanceof errors.HeadersTimeoutError || error instanceof errors.ConnectTimeoutError)
    return `no answer within ${timeoutMs} ms`;
  const cause = ((error as { cause?: unknown }).cause ?? error) as { code?: string; message?: string };
  if (cause.code === 'EREFUSEDADDRESS') return `refused: ${cause.message}`;
  if (cause.code === 'ECONNREFUSED') return 'connection refused';
  if (cause.code === 'ECONNRESET' || error instanceof errors.SocketError) return 'connection reset';
  if (cause.code === 'ENOTFOUND') return 'host not found';
  return cause.message ?? String(error);
}
