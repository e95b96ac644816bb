import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  type Stats,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { EventType, StreamStatus } from '@animal-store/client';
import { Command, InvalidArgumentError } from 'commander';
import { isEventType } from '../domain/events.js';
import type { CliIo } from './io.js';

/** Where the secret is kept, in the folder `listen` runs in: a receiver configured once keeps working. */
export const LISTEN_SECRET_FILE = '.petstore/listen-secret';
const DEFAULT_API_URL = 'http://127.0.0.1:3000/v1';
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

/**
 * The folder's secret: the one kept in `.petstore/listen-secret`, or a new one, kept there. Whoever can
 * read it can forge deliveries to the receiver, and whoever can write it can choose the secret, so the
 * folder must be this user's alone (0700) and the file too (0600), neither a link: a file or folder
 * that others may read or write is refused, with how to mend it. A new file is created exclusively and
 * without following links, so nothing put in its place beforehand is written through.
 */
export function listenSecret(dir: string): string {
  const folder = join(dir, '.petstore');
  const path = join(dir, LISTEN_SECRET_FILE);
  try {
    mkdirSync(folder, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  assertPrivate(folder, 'folder', 0o700);
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw new Error(`${path} is a symbolic link: remove it, and a new secret is made`);
    if (code !== 'ENOENT') throw error;
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const created = openSync(
      path,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o600,
    );
    try {
      writeFileSync(created, `${secret}\n`);
    } finally {
      closeSync(created);
    }
    return secret;
  }
  try {
    assertPrivate(path, 'file', 0o600, fstatSync(fd));
    const kept = readFileSync(fd, 'utf8').trim();
    if (!/^whsec_[A-Za-z0-9+/]{43}=$/.test(kept))
      throw new Error(
        `${path} does not hold a secret (whsec_ and 32 bytes in base64): remove it, and a new one is made`,
      );
    return kept;
  } finally {
    closeSync(fd);
  }
}

/** Refuses a folder or file of the secret's that is a link, not this user's, or open to others. */
function assertPrivate(
  path: string,
  kind: 'folder' | 'file',
  mode: number,
  stat: Stats = lstatSync(path),
): void {
  const wanted = kind === 'folder' ? stat.isDirectory() : stat.isFile();
  if (!wanted)
    throw new Error(
      `${path} is not a ${kind}${stat.isSymbolicLink() ? ' but a symbolic link' : ''}: remove it`,
    );
  if (process.getuid && stat.uid !== process.getuid())
    throw new Error(`${path} belongs to another user: remove it, and a new ${kind} is made`);
  if ((stat.mode & 0o077) !== 0)
    throw new Error(
      `${path} may be read or written by others (mode ${(stat.mode & 0o777).toString(8)}), and it holds the secret that signs what reaches your receiver: run chmod ${mode.toString(8)} ${path}${kind === 'file' ? ', or remove it to have a new secret made' : ''}`,
    );
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

/**
 * The client's live stream (streamEvents, from now on), each event POSTed to the receiver as it comes;
 * what the stream does between events (a break, a wait, a refusal it retries) on standard error.
 */
async function forwardEvents({ forwardTo, apiUrl, key, types, secret, io, signal }: Forwarding) {
  // Loaded here: `petstore --help` and the other commands start without undici or the client.
  const [{ PetstoreClient, PetstoreError }, { WebhookSender }, { webhookHeaders }, network] =
    await Promise.all([
      import('@animal-store/client'),
      import('../webhooks/sender.js'),
      import('../webhooks/signature.js'),
      import('../domain/network-policy.js'),
    ]);
  // The receiver is on this machine, which a real delivery would refuse: here every address is allowed.
  const sender = new WebhookSender(new network.NetworkPolicy(network.parseNetworks('0.0.0.0/0,::/0')), {
    timeoutMs: FORWARD_TIMEOUT_MS,
    connectionsPerEndpoint: 1,
  });
  const api = apiUrl.replace(/\/$/, '');
  const client = new PetstoreClient({ baseUrl: api, apiKey: key });
  const onStatus = (status: StreamStatus) => {
    if (status.state === 'ready') {
      io.stdout.write(
        `Ready: forwarding events to ${forwardTo}, signed with ${secret} (kept in ${LISTEN_SECRET_FILE})\n`,
      );
      return;
    }
    const seconds = status.waitMs / 1000;
    const resume = `reconnecting in ${seconds} s, after event ${status.after ?? 'now'}`;
    const line = {
      unreachable: `cannot reach ${api}: ${describe(status.error)}; trying again in ${seconds} s`,
      refused: `${api}/events answered ${status.status}; trying again in ${seconds} s`,
      ended: `the stream ended; ${resume}`,
      broke: `the stream broke (${describe(status.error)}); ${resume}`,
    }[status.reason];
    io.stderr.write(`${line}\n`);
  };
  try {
    for await (const { event, json: body } of client.streamEventMessages({
      types: types as EventType[],
      after: 'now',
      signal,
      onStatus,
    })) {
      // The body of a real delivery: the Event as the stream (and getEvent) sent it, byte for byte.
      const id = String(event.id);
      const timestamp = Math.floor(Date.now() / 1000);
      const result = await sender.send(0n, forwardTo, webhookHeaders([secret], id, timestamp, body), body);
      io.stdout.write(`${new Date().toISOString()}  ${event.type.padEnd(15)}  ${id}  ${outcome(result)}\n`);
    }
  } catch (error) {
    if (signal.aborted) return;
    if (error instanceof PetstoreError)
      throw new Error(`${api}/events answered ${error.status}: ${error.message}`, { cause: error });
    throw error;
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
