import { readFileSync } from 'node:fs';
import type { BlockList } from 'node:net';
import { getHeapStatistics } from 'node:v8';
import { Ajv } from 'ajv';
import envSchema from 'env-schema';
import { type Static, Type } from 'typebox';
import { NetworkPolicy, parseNetworks } from '../domain/network-policy.js';
import { DEFAULT_RETRY_SCHEDULE, parseDurationMs, parseRetrySchedule } from '../domain/retry-schedule.js';
import { replicaLabel } from '../storage/postgres/replica-label.js';

/**
 * What a valid value looks like, in words, where the schema's own keywords (a pattern) would not say
 * it to a person; configuration errors quote it. Integers, numbers, booleans and lists of values are
 * described from their schema.
 */
const EXPECTED = 'x-expected';

/**
 * An http(s) origin and path ending in /v1, written exactly as the URL parser writes it back (no user
 * info, query, fragment, nor any character that would need escaping): the value is sent as it is in
 * `Location` and `Link` headers, where `https://a.example/x>; rel="preload", <https://b.example/v1`
 * would add a link of its own.
 */
function isBaseUrl(value: string): boolean {
  if (!URL.canParse(value)) return false;
  const url = new URL(value);
  return (
    (url.protocol === 'https:' || url.protocol === 'http:') &&
    url.username === '' &&
    url.password === '' &&
    url.search === '' &&
    url.hash === '' &&
    url.href === value &&
    /^[\x21-\x7e]+$/.test(value) &&
    !/[<>"'\\^`{|}]/.test(value)
  );
}

/** A duration as the webhook settings take it (parseDurationMs), and a list of them. */
const DURATION = '[0-9]{1,9}(?:ms|s|m|h|d)';
const DURATION_LIST = `^${DURATION}(?:,${DURATION})*$`;

const BaseUrl = (description: string) =>
  Type.String({
    format: 'base-url',
    pattern: '^https?://[^?#]*/v1/?$',
    [EXPECTED]:
      'an http:// or https:// URL ending in /v1 as a URL parser writes it (lower-case host, no user, query, fragment or character to escape), e.g. https://api.example.com/v1',
    description,
  });

/**
 * Every setting the service reads, with its default and meaning. The configuration table in
 * docs/configuration.md is this list. Values are validated at start; a bad one stops the start with a
 * message naming it.
 */
const EnvSchema = Type.Object({
  HOST: Type.String({ default: '127.0.0.1', description: 'Interface to listen on (0.0.0.0 in containers).' }),
  PORT: Type.Integer({
    minimum: 0,
    maximum: 65535,
    default: 3000,
    description: 'TCP port; 0 picks a free one.',
  }),
  METRICS_PORT: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: 65535,
      description:
        'Serve GET /metrics on a listener of its own on this port (0 picks a free one), and no longer on PORT; unset: /metrics is on PORT.',
    }),
  ),
  METRICS_HOST: Type.Optional(
    Type.String({
      pattern: '^[A-Za-z0-9.:-]{1,253}$',
      [EXPECTED]: 'a host name or IP address, e.g. 0.0.0.0 or ::',
      description: 'Interface the METRICS_PORT listener listens on; HOST when unset.',
    }),
  ),
  DOCS_ENABLED: Type.Boolean({
    default: true,
    description:
      'false: no docs page (/docs and its scripts and styles answer 404); the OpenAPI document stays at /v1/openapi.json.',
  }),
  DATABASE_URL: Type.String({
    default: 'sqlite:./data/petstore.db',
    pattern: '^(sqlite:.+|postgres(ql)?://.+)$',
    [EXPECTED]: 'sqlite:<path>, sqlite::memory: or postgres://user@host:port/db',
    description: 'sqlite:<path>, sqlite::memory: or postgres://user@host:port/db',
  }),
  DATABASE_POOL_SIZE: Type.Integer({
    minimum: 1,
    maximum: 1000,
    default: 10,
    description: 'PostgreSQL connections per process; keep nodes × workers × this under max_connections.',
  }),
  DATABASE_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    maximum: 600_000,
    default: 5_000,
    description:
      'Longest wait for the database: for a connection, a statement, a lock. Past it the request gets 503 unavailable with Retry-After.',
  }),
  DATABASE_REPLICA_URLS: Type.String({
    default: '',
    pattern: '^(\\s*postgres(ql)?://[^,\\s]+\\s*(,\\s*postgres(ql)?://[^,\\s]+\\s*)*)?$',
    [EXPECTED]: 'postgres:// URLs of streaming replicas of DATABASE_URL, separated by commas',
    description:
      "PostgreSQL streaming replicas of DATABASE_URL, comma-separated postgres:// URLs: the API's reads go to one that has replayed the caller's last write, else to the primary. Empty: every read on the primary.",
  }),
  DATABASE_REPLICA_MAX_LAG_MS: Type.Integer({
    minimum: 0,
    maximum: 3_600_000,
    default: 1000,
    description:
      'A replica whose replay is further behind the primary than this is not read from (callers that never wrote may see data this old).',
  }),
  PETSTORE_API_KEYS: Type.String({
    default: '',
    pattern: '^(\\s*[^,\\s]{16,}\\s*(,\\s*[^,\\s]{16,}\\s*)*)?$',
    [EXPECTED]: 'keys of at least 16 characters (no spaces or commas), separated by commas',
    description: 'Extra API keys, comma-separated, each at least 16 characters (automation, tests).',
  }),
  PUBLIC_BASE_URL: Type.Optional(
    BaseUrl('Production base address, ending in /v1; makes emitted links absolute.'),
  ),
  STAGING_BASE_URL: Type.Optional(
    BaseUrl('Staging base address, ending in /v1; listed in the OpenAPI servers.'),
  ),
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
    { default: 'info', description: 'pino log level.' },
  ),
  LOG_FORMAT: Type.Union(
    ['json', 'pretty'].map((format) => Type.Literal(format)),
    {
      default: 'json',
      description:
        'json: one JSON object per line, for machines; pretty: one readable line per entry with the local time, for people at a terminal.',
    },
  ),
  LOG_REQUESTS: Type.Boolean({
    default: true,
    description:
      'One line per answered request, at a level by its outcome; false keeps only errored requests (about 10 to 20% less CPU per read under load).',
  }),
  BODY_LIMIT: Type.Integer({
    minimum: 64,
    maximum: 16 * 1024 * 1024,
    default: 64 * 1024,
    description: 'Largest request body in bytes; larger ones get 413.',
  }),
  CORS_ORIGINS: Type.String({
    default: '',
    pattern: '^(\\s*https?://[^,\\s/]+\\s*(,\\s*https?://[^,\\s/]+\\s*)*)?$',
    [EXPECTED]:
      'origins separated by commas, each a scheme and host with no path, e.g. https://app.example.com',
    description:
      'Browser origins allowed to call the API (CORS), comma-separated, e.g. https://app.example.com; none by default.',
  }),
  HEADERS_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    maximum: 600_000,
    default: 10_000,
    description:
      'A client must send its request headers within this many ms, or it gets 408 request_timeout and is disconnected.',
  }),
  REQUEST_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    maximum: 3_600_000,
    default: 30_000,
    description:
      'A client must send its whole request (headers and body) within this many ms, or it gets 408 request_timeout and is disconnected.',
  }),
  MAX_CONNECTIONS: Type.Integer({
    minimum: 0,
    maximum: 1_000_000,
    default: 0,
    description:
      'Client connections the API port keeps open at once; one more is closed as it arrives (and counted). 0 means half the open-file limit (`ulimit -n`), so connections alone can never take every descriptor the database, logs and webhooks need.',
  }),
  RATE_LIMIT_PER_SECOND: Type.Number({
    minimum: 0,
    maximum: 1_000_000,
    default: 100,
    description:
      'Requests per second each API key may sustain on /v1 (token bucket refill rate); 0 turns rate limiting off.',
  }),
  RATE_LIMIT_BURST: Type.Integer({
    minimum: 1,
    maximum: 1_000_000,
    default: 200,
    description: 'Requests an API key may send at once before the rate applies (token bucket size).',
  }),
  AUTH_FAILURES_PER_MINUTE: Type.Integer({
    minimum: 0,
    maximum: 1_000_000,
    default: 30,
    description:
      'Failed authentications (401 for a bad key) a client address may have per minute, in a burst or spread out, before its requests get 429 until it may try again, unless they carry a live key; 0 turns this off.',
  }),
  TRUSTED_PROXIES: Type.String({
    default: '',
    pattern: '^[0-9A-Fa-f:.,/\\s]*$',
    [EXPECTED]: 'IP addresses or CIDR ranges separated by commas, e.g. 10.0.0.0/8,192.168.1.7',
    description:
      'Addresses or CIDR ranges of the proxies in front of the service, comma-separated (e.g. 10.0.0.0/8); their X-Forwarded-For names the client address. Empty: the connecting address is the client.',
  }),
  REDIS_URL: Type.Optional(
    Type.String({
      pattern: '^rediss?://.+',
      [EXPECTED]: 'redis://host:port or rediss://host:port',
      description:
        'redis://host:port: shares the rate-limit buckets between nodes, so N nodes enforce one budget per key; in memory per process when unset.',
    }),
  ),
  OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: Type.Integer({
    minimum: 0,
    maximum: 60_000,
    default: 1000,
    description:
      'Mean event-loop delay (ms) above which /v1 answers 503 unavailable at once; 0 turns the check off.',
  }),
  OVERLOAD_MAX_HEAP_USED_MB: Type.Integer({
    minimum: 0,
    maximum: 1_048_576,
    default: 0,
    description:
      'V8 heap in use (MiB) above which /v1 answers 503 unavailable at once; 0 means 90% of the V8 heap limit.',
  }),
  EVENT_RETENTION_DAYS: Type.Integer({
    minimum: 1,
    maximum: 36_500,
    default: 30,
    description:
      'Days an event is kept (listEvents, getEvent, webhook deliveries); older ones are deleted in the background.',
  }),
  EVENT_STREAM_BUFFER_BYTES: Type.Integer({
    minimum: 1_024,
    maximum: 1_073_741_824,
    default: 1_048_576,
    description:
      'Bytes a live event stream may leave unsent (its client not reading) before it is closed; the client resumes with Last-Event-ID.',
  }),
  EVENT_STREAM_MAX_PER_KEY: Type.Integer({
    minimum: 1,
    maximum: 100_000,
    default: 10,
    description:
      'Live event streams one API key may have open at once on a node; one more is 429 rate_limited.',
  }),
  EVENT_STREAM_KEEP_ALIVE_MS: Type.Integer({
    minimum: 100,
    maximum: 15_000,
    default: 10_000,
    description:
      'How often a `: keep-alive` comment goes out on every live event stream. A stream whose client has read nothing from one keep-alive to the next while bytes wait for it is closed (it resumes with Last-Event-ID).',
  }),
  WEBHOOK_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    maximum: 120_000,
    default: 10_000,
    description:
      'How long a webhook receiver has to answer (connection, headers and all); a 2xx after that is a failure.',
  }),
  WEBHOOK_RETRY_SCHEDULE: Type.String({
    default: DEFAULT_RETRY_SCHEDULE,
    pattern: DURATION_LIST,
    [EXPECTED]: 'durations separated by commas, e.g. 5s,5m,30m,2h',
    description:
      'Delays between the attempts of a failing webhook delivery, each ±20% at random; after the last, the delivery is failed. One attempt more than delays.',
  }),
  WEBHOOK_DISABLE_AFTER: Type.String({
    default: '5d',
    pattern: `^${DURATION}$`,
    [EXPECTED]: 'a duration such as 5d, 12h or 30m',
    description:
      'An endpoint whose deliveries have all failed for this long, with no success between, is disabled (disabledReason "failing").',
  }),
  WEBHOOK_CONCURRENCY_PER_ENDPOINT: Type.Integer({
    minimum: 1,
    maximum: 64,
    default: 4,
    description:
      'Attempts to one webhook endpoint at once, across every node: one slow receiver cannot hold every delivery back.',
  }),
  WEBHOOK_MAX_ENDPOINTS: Type.Integer({
    minimum: 1,
    maximum: 10_000,
    default: 100,
    description:
      'Webhook endpoints that may exist at once (enabled or disabled); creating one more is 409 conflict.',
  }),
  WEBHOOK_ALLOWED_NETWORKS: Type.String({
    default: '',
    pattern: '^[0-9A-Fa-f:.,/\\s]*$',
    [EXPECTED]: 'CIDR ranges separated by commas, e.g. 10.1.0.0/16,fd00::/8',
    description:
      'Networks webhooks may reach although they are not public, CIDR, comma-separated; every other range of the IANA special-purpose registries that is not globally reachable (loopback, private, link-local, IPv4 carried in IPv6 other than IPv4-mapped…) stays refused. Empty: public addresses only. What an allowed network answers is readable: a failed delivery keeps up to 1 KiB of the answer (lastError), shown to every key with webhooks:read.',
  }),
});

export type Env = Static<typeof EnvSchema>;

export interface Config {
  host: string;
  port: number;
  /** Where GET /metrics is served apart from the API; undefined: on the API's own port. */
  metrics: { host: string; port: number } | undefined;
  docsEnabled: boolean;
  databaseUrl: string;
  databasePoolSize: number;
  databaseTimeoutMs: number;
  /** PostgreSQL streaming replicas of databaseUrl for the API's reads; empty: none (always with SQLite). */
  databaseReplicaUrls: string[];
  /** A replica further behind than this is not read from. */
  databaseReplicaMaxLagMs: number;
  apiKeys: string[];
  publicBaseUrl: string | undefined;
  stagingBaseUrl: string | undefined;
  logLevel: string;
  logFormat: 'json' | 'pretty';
  logRequests: boolean;
  bodyLimit: number;
  corsOrigins: string[];
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  /** Client connections kept open at once on the API port (MAX_CONNECTIONS, or half the descriptor limit). */
  maxConnections: number;
  rateLimit: { perSecond: number; burst: number };
  /** Failed authentications per client address: a bucket of `burst`, refilled at `perSecond`; undefined when off. */
  authFailures: { perSecond: number; burst: number } | undefined;
  trustedProxies: string[];
  redisUrl: string | undefined;
  overload: { maxEventLoopDelayMs: number; maxHeapUsedBytes: number };
  eventRetentionDays: number;
  /** Live event streams: unsent bytes before a stream is closed, and streams per key on a node. */
  eventStreams: { bufferBytes: number; maxPerKey: number; keepAliveMs: number };
  /** The configuration's variables as given (those it knows, set): what a thread of this process loads its own from. */
  variables: Readonly<Record<string, string>>;
  webhooks: {
    timeoutMs: number;
    /** Delays between attempts, in milliseconds. */
    retrySchedule: number[];
    disableAfterMs: number;
    concurrencyPerEndpoint: number;
    /** Endpoints that may exist at once (WEBHOOK_MAX_ENDPOINTS). */
    maxEndpoints: number;
    /** Where deliveries may connect: public addresses, and WEBHOOK_ALLOWED_NETWORKS. */
    policy: NetworkPolicy;
  };
}

/** Where the process's limits are on Linux; elsewhere the common default is assumed. */
const LIMITS_FILE = '/proc/self/limits';
const COMMON_OPEN_FILE_LIMIT = 1_024;

/** The soft limit on open file descriptors (`ulimit -n`): Node has no call for it, Linux lists it. */
export function openFileLimit(): number {
  try {
    const line = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync(LIMITS_FILE, 'utf8'));
    if (line?.[1] === 'unlimited') return 1_000_000;
    return line?.[1] ? Number(line[1]) : COMMON_OPEN_FILE_LIMIT;
  } catch {
    return COMMON_OPEN_FILE_LIMIT;
  }
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/**
 * The configuration's validation, compiled once per process. Ajv caches a compiled schema by the schema
 * object, so one instance and one schema are kept (env-schema sets `additionalProperties` on the
 * schema, hence a copy). Given options instead of an instance, env-schema builds a new Ajv per call,
 * which compiles the meta-schema again: about 20 ms of every loadConfig, in every process and test.
 */
const validation: { schema: typeof EnvSchema; ajv?: Ajv } = { schema: structuredClone(EnvSchema) };
function configAjv(): Ajv {
  // env-schema's own defaults (its getDefaultInstance), with this schema's format and keyword.
  validation.ajv ??= new Ajv({
    allErrors: true,
    removeAdditional: true,
    useDefaults: true,
    coerceTypes: true,
    allowUnionTypes: true,
    addUsedSchema: false,
    keywords: [envSchema.keywords.separator],
    // The schema is ours and fixed, and strict mode still refuses a keyword it does not know when it
    // compiles; checking it against the meta-schema too would cost every process's start about 30 ms.
    validateSchema: false,
  })
    .addFormat('base-url', isBaseUrl)
    .addKeyword(EXPECTED);
  return validation.ajv;
}

/** Reads and validates the configuration; throws ConfigError naming the offending variable. */
/** Settings that were removed, and what replaced them: one still set is refused at start, naming it. */
const REMOVED_VARIABLES: Record<string, string> = {
  WEBHOOK_DELIVERY_SHARE:
    "it was removed: in --role all, deliveries run on a thread of their own, with their own event loop and database connection, and need no share of the API's; unset it",
};

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  for (const [name, why] of Object.entries(REMOVED_VARIABLES))
    if (env[name] !== undefined) throw new ConfigError(`invalid configuration: ${name}: ${why}`);
  let parsed: Env;
  const variables = pickKnown(env);
  try {
    parsed = envSchema<Env>({
      schema: validation.schema,
      data: variables,
      env: false,
      ajv: configAjv(),
    });
  } catch (error) {
    throw new ConfigError(`invalid configuration: ${describeInvalid(error)}`);
  }
  return {
    host: parsed.HOST,
    port: parsed.PORT,
    metrics:
      parsed.METRICS_PORT === undefined
        ? undefined
        : { host: parsed.METRICS_HOST ?? parsed.HOST, port: parsed.METRICS_PORT },
    docsEnabled: parsed.DOCS_ENABLED,
    databaseUrl: parsed.DATABASE_URL,
    databasePoolSize: parsed.DATABASE_POOL_SIZE,
    databaseTimeoutMs: parsed.DATABASE_TIMEOUT_MS,
    databaseReplicaUrls: replicaUrls(parsed.DATABASE_URL, list(parsed.DATABASE_REPLICA_URLS)),
    databaseReplicaMaxLagMs: parsed.DATABASE_REPLICA_MAX_LAG_MS,
    apiKeys: list(parsed.PETSTORE_API_KEYS),
    publicBaseUrl: parsed.PUBLIC_BASE_URL?.replace(/\/$/, ''),
    stagingBaseUrl: parsed.STAGING_BASE_URL?.replace(/\/$/, ''),
    logLevel: parsed.LOG_LEVEL,
    logFormat: parsed.LOG_FORMAT as Config['logFormat'],
    logRequests: parsed.LOG_REQUESTS,
    bodyLimit: parsed.BODY_LIMIT,
    corsOrigins: list(parsed.CORS_ORIGINS),
    headersTimeoutMs: parsed.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: parsed.REQUEST_TIMEOUT_MS,
    maxConnections: parsed.MAX_CONNECTIONS > 0 ? parsed.MAX_CONNECTIONS : Math.floor(openFileLimit() / 2),
    rateLimit: { perSecond: parsed.RATE_LIMIT_PER_SECOND, burst: parsed.RATE_LIMIT_BURST },
    authFailures:
      parsed.AUTH_FAILURES_PER_MINUTE > 0
        ? { perSecond: parsed.AUTH_FAILURES_PER_MINUTE / 60, burst: parsed.AUTH_FAILURES_PER_MINUTE }
        : undefined,
    trustedProxies: list(parsed.TRUSTED_PROXIES),
    redisUrl: parsed.REDIS_URL,
    overload: {
      maxEventLoopDelayMs: parsed.OVERLOAD_MAX_EVENT_LOOP_DELAY_MS,
      maxHeapUsedBytes:
        parsed.OVERLOAD_MAX_HEAP_USED_MB > 0
          ? parsed.OVERLOAD_MAX_HEAP_USED_MB * 1024 * 1024
          : Math.floor(getHeapStatistics().heap_size_limit * 0.9),
    },
    eventRetentionDays: parsed.EVENT_RETENTION_DAYS,
    variables,
    eventStreams: {
      bufferBytes: parsed.EVENT_STREAM_BUFFER_BYTES,
      maxPerKey: parsed.EVENT_STREAM_MAX_PER_KEY,
      keepAliveMs: parsed.EVENT_STREAM_KEEP_ALIVE_MS,
    },
    webhooks: {
      timeoutMs: parsed.WEBHOOK_TIMEOUT_MS,
      retrySchedule: parseRetrySchedule(parsed.WEBHOOK_RETRY_SCHEDULE),
      disableAfterMs: parseDurationMs(parsed.WEBHOOK_DISABLE_AFTER),
      concurrencyPerEndpoint: parsed.WEBHOOK_CONCURRENCY_PER_ENDPOINT,
      maxEndpoints: parsed.WEBHOOK_MAX_ENDPOINTS,
      policy: new NetworkPolicy(allowedNetworks(parsed.WEBHOOK_ALLOWED_NETWORKS)),
    },
  };
}

/** Replicas are PostgreSQL's streaming replicas: SQLite has none, and a list given with it is a mistake. */
function replicaUrls(databaseUrl: string, urls: string[]): string[] {
  if (urls.length > 0 && !/^postgres(ql)?:\/\//.test(databaseUrl))
    throw new ConfigError(
      'invalid configuration: DATABASE_REPLICA_URLS must be empty unless DATABASE_URL is a postgres:// URL (replicas are PostgreSQL streaming replicas)',
    );
  const unclear = urls.findIndex((url) => replicaLabel(url) === undefined);
  if (unclear >= 0)
    throw new ConfigError(
      `invalid configuration: DATABASE_REPLICA_URLS: URL ${unclear + 1} is not a postgres://user:password@host:port/database URL that parses cleanly; percent-encode any "/", "@", ":" or "#" in the user or password (e.g. / as %2F)`,
    );
  return urls;
}

function allowedNetworks(list: string): BlockList {
  try {
    return parseNetworks(list);
  } catch (error) {
    throw new ConfigError(`invalid configuration: WEBHOOK_ALLOWED_NETWORKS: ${(error as Error).message}`);
  }
}

/**
 * "PORT must be an integer from 0 to 65535; LOG_LEVEL must be one of …": each offending variable once,
 * with what a valid value looks like rather than the JSON Schema keyword it failed. Values are not
 * repeated: they may hold a password or a key.
 */
function describeInvalid(error: unknown): string {
  const failures = (error as { errors?: { instancePath: string }[] }).errors ?? [];
  const properties = EnvSchema.properties as unknown as Record<string, Record<string, unknown>>;
  const described = [...new Set(failures.map((failure) => failure.instancePath.slice(1)))]
    .filter((name) => name in properties)
    .map((name) => `${name} must be ${expectedValue(properties[name] as Record<string, unknown>)}`);
  return described.length > 0 ? described.join('; ') : (error as Error).message;
}

/** A valid value in words, from the schema of one variable. */
function expectedValue(schema: Record<string, unknown>): string {
  if (typeof schema[EXPECTED] === 'string') return schema[EXPECTED] as string;
  const range = (kind: string) => `${kind} from ${schema.minimum} to ${schema.maximum}`;
  if (schema.type === 'integer') return range('an integer');
  if (schema.type === 'number') return range('a number');
  if (schema.type === 'boolean') return 'true or false';
  const values = (schema.anyOf as { const: string }[] | undefined)?.map((option) => option.const);
  if (values) return `one of ${values.slice(0, -1).join(', ')} or ${values.at(-1)}`;
  return `a value matching ${schema.pattern}`;
}

const list = (value: string): string[] =>
  value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');

/** The documented variables only: the rest of the environment is none of our business. */
function pickKnown(env: NodeJS.ProcessEnv): Record<string, string> {
  const known: Record<string, string> = {};
  for (const name of Object.keys(EnvSchema.properties)) {
    const value = env[name];
    if (value !== undefined && value !== '') known[name] = value;
  }
  return known;
}

/** Name, default and description of each variable, for `petstore --help` and docs/configuration.md. */
export function describeConfig(): { name: string; default: unknown; description: string }[] {
  return Object.entries(EnvSchema.properties).map(([name, schema]) => ({
    name,
    default: (schema as { default?: unknown }).default,
    description: (schema as { description?: string }).description ?? '',
  }));
}
