import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { isEventType } from '../domain/events.js';
import type { CliIo } from './io.js';
import { ServerSentEventParser } from './server-sent-events.js';

/** Where the secret is kept, in the folder `listen` runs in: a receiver configured once keeps working. */
export const LISTEN_SECRET_FILE = '.petstore/listen-secret';
const DEFAULT_API_URL = 'http://127.0.0.1:3000/v1';
/** Until the service says otherwise (`retry:`), how long to wait before opening a broken stream again. */
const RETRY_MS = 2_000;
/** How long the receiver has to answer, as a real delivery's WEBHOOK_TIMEOUT_MS default. */
const FORWARD_TIMEOUT_MS = 10_000;

interface ListenOptions {
  forwardTo: string;
  apiUrl: string;
  apiKey?: string;
  types: string[];
}

function parseUrl(value: string): string {
  if (!URL.canParse(value) || !/^https?:$/.test(new URL(value).protocol))
    throw new InvalidArgumentError('expected an http:// or https:// URL');
  return value;
}

function collectType(value: string, previous: string[]): string[] {
  if (!isEventType(value))
    throw new InvalidArgumentError('expected pet.created, order.placed, order.delivered or order.cancelled');
  return [...previous, value];
}

/** The folder's secret: the one kept in `.petstore/listen-secret`, or a new one, kept there (0600). */
export function listenSecret(dir: string): string {
  const path = join(dir, LISTEN_SECRET_FILE);
  try {
    const kept = readFileSync(path, 'utf8').trim();
    if (/^whsec_[A-Za-z0-9+/]+=*$/.test(kept)) return kept;
  } catch {
    // none yet
  }
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  mkdirSync(join(dir, '.petstore'), { recursive: true, mode: 0o700 });
  writeFileSync(path, `${secret}\n`, { mode: 0o600 });
  return secret;
}

/**
 * `petstore listen --forward-to <url>`: webhooks on a developer's laptop, as Stripe's `stripe listen`
 * does it. A plain client of the public API: it opens the live event stream and POSTs each event to the
 * local receiver exactly as a delivery is made (the same body, the Standard Webhooks headers, signed
 * with the folder's secret), one printed line per event with the receiver's answer.
 */
export function listenCommand(io: CliIo): Command {
  return new Command('listen')
    .description('forward new events to a local receiver, signed')
    .requiredOption(
      '--forward-to <url>',
      'where each event is POSTed, e.g. http://127.0.0.1:4000/webhooks',
      parseUrl,
    )
    .option('--api-url <url>', "the service's /v1 address", parseUrl, DEFAULT_API_URL)
    .option('--api-key <key>', 'an API key with events:read (default: PETSTORE_API_KEY)')
    .option('--types <type>', 'only events of this type; repeat for several', collectType, [])
    .action(async (options: ListenOptions) => {
      const key = options.apiKey ?? io.env.PETSTORE_API_KEY;
      if (!key) throw new Error('no API key: pass --api-key or set PETSTORE_API_KEY (one with events:read)');
      const secret = listenSecret(process.cwd());
      const stop = new AbortController();
      // Ctrl-C (or a SIGTERM) ends the stream: the command then exits 0.
      const onSignal = () => stop.abort();
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      try {
        await forwardEvents({ ...options, key, secret, io, signal: stop.signal });
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    });
}

interface Forwarding extends ListenOptions {
  key: string;
  secret: string;
  io: CliIo;
  signal: AbortSignal;
}

/** A wait that an abort cuts short. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

async function forwardEvents({ forwardTo, apiUrl, key, types, secret, io, signal }: Forwarding) {
  // Loaded here: `petstore --help` and the other commands start without undici.
  const [{ WebhookSender }, { webhookHeaders }, { NetworkPolicy, parseNetworks }] = await Promise.all([
    import('../webhooks/sender.js'),
    import('../webhooks/signature.js'),
    import('../domain/network-policy.js'),
  ]);
  // The receiver is on this machine, which a real delivery would refuse: here every address is allowed.
  const sender = new WebhookSender(new NetworkPolicy(parseNetworks('0.0.0.0/0,::/0')), {
    timeoutMs: FORWARD_TIMEOUT_MS,
    connectionsPerEndpoint: 1,
  });
  const api = apiUrl.replace(/\/$/, '');
  const authorization = `Bearer ${key}`;
  const refused = async (response: Response) =>
    new Error(`${api}/events answered ${response.status}: ${(await response.text()).slice(0, 300)}`);
  try {
    let last = await latestEventId(api, authorization, signal, refused);
    if (signal.aborted) return;
    io.stdout.write(
      `Ready: forwarding events to ${forwardTo}, signed with ${secret} (kept in ${LISTEN_SECRET_FILE})\n`,
    );
    let retryMs = RETRY_MS;
    const query = new URLSearchParams(types.map((type): [string, string] => ['type', type]));
    while (!signal.aborted) {
      query.set('after', String(last));
      let response: Response;
      try {
        response = await fetch(`${api}/events?${query}`, {
          headers: { accept: 'text/event-stream', authorization, 'last-event-id': String(last) },
          signal,
        });
      } catch (error) {
        if (signal.aborted) break;
        io.stderr.write(`cannot reach ${api}: ${describe(error)}; trying again in ${retryMs / 1000} s\n`);
        await pause(retryMs, signal);
        continue;
      }
      if (response.status === 429 || response.status >= 500) {
        await response.body?.cancel();
        io.stderr.write(`${api}/events answered ${response.status}; trying again in ${retryMs / 1000} s\n`);
        await pause(retryMs, signal);
        continue;
      }
      if (!response.ok) throw await refused(response);
      const arrived: { id: bigint; type: string; body: string }[] = [];
      const parser = new ServerSentEventParser({
        event: ({ type, data, lastEventId }) => arrived.push({ id: BigInt(lastEventId), type, body: data }),
        retry: (ms) => {
          retryMs = ms;
        },
      });
      try {
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          parser.push(chunk);
          for (const event of arrived.splice(0)) {
            if (event.id <= last) continue; // already forwarded before a break
            const id = String(event.id);
            const timestamp = Math.floor(Date.now() / 1000);
            const result = await sender.send(
              0n,
              forwardTo,
              webhookHeaders([secret], id, timestamp, event.body),
              event.body,
            );
            last = event.id;
            io.stdout.write(
              `${new Date().toISOString()}  ${event.type.padEnd(15)}  ${id}  ${outcome(result)}\n`,
            );
          }
        }
        io.stderr.write(`the stream ended; reconnecting in ${retryMs / 1000} s, after event ${last}\n`);
      } catch (error) {
        if (signal.aborted) break;
        io.stderr.write(
          `the stream broke (${describe(error)}); reconnecting in ${retryMs / 1000} s, after event ${last}\n`,
        );
      }
      await pause(retryMs, signal);
    }
  } catch (error) {
    if (!signal.aborted) throw error;
  } finally {
    await sender.destroy();
  }
}

/** The receiver's answer, as the line shows it. */
function outcome(
  result: { answered: true; status: number; body: string } | { answered: false; error: string },
): string {
  if (!result.answered) return `-> failed: ${result.error}`;
  if (result.status >= 300 && result.status < 400) return `-> ${result.status} (a redirect: not followed)`;
  return `-> ${result.status}`;
}

function describe(error: unknown): string {
  const cause = (error as { cause?: { message?: string } }).cause?.message;
  return cause ?? (error as Error).message ?? String(error);
}

/**
 * The id of the newest event, so that forwarding starts from now on: found with the feed alone, as any
 * client could (`?after=n&limit=1` is empty exactly when no event has an id above n), by doubling then
 * halving, about 2·log2(id) small reads.
 */
async function latestEventId(
  api: string,
  authorization: string,
  signal: AbortSignal,
  refused: (response: Response) => Promise<Error>,
): Promise<bigint> {
  const anyAfter = async (after: bigint) => {
    let response: Response;
    try {
      response = await fetch(`${api}/events?after=${after}&limit=1`, { headers: { authorization }, signal });
    } catch (error) {
      throw new Error(`cannot reach ${api}: ${describe(error)}`);
    }
    if (!response.ok) throw await refused(response);
    return ((await response.json()) as unknown[]).length > 0;
  };
  if (!(await anyAfter(0n))) return 0n;
  let low = 0n; // an event has a greater id
  let high = 1n;
  while (await anyAfter(high)) {
    low = high;
    high *= 2n;
  }
  while (high - low > 1n) {
    const middle = (low + high) / 2n;
    if (await anyAfter(middle)) low = middle;
    else high = middle;
  }
  return high;
}
