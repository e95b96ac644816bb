import { getHeapStatistics } from 'node:v8';
import envSchema from 'env-schema';
import { type Static, Type } from 'typebox';

const BaseUrl = (description: string) =>
  Type.String({ format: 'uri', pattern: '^https?://[^?#]*/v1/?$', description });

/**
 * Every setting the service reads, with its default and meaning. The README's configuration table is
 * this list. Values are validated at start; a bad one stops the start with a message naming it.
 */
const EnvSchema = Type.Object({
  HOST: Type.String({ default: '127.0.0.1', description: 'Interface to listen on (0.0.0.0 in containers).' }),
  PORT: Type.Integer({
    minimum: 0,
    maximum: 65535,
    default: 3000,
    description: 'TCP port; 0 picks a free one.',
  }),
  DATABASE_URL: Type.String({
    default: 'sqlite:./data/petstore.db',
    pattern: '^(sqlite:.+|postgres(ql)?://.+)$',
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
  PETSTORE_API_KEYS: Type.String({
    default: '',
    pattern: '^(\\s*[^,\\s]{16,}\\s*(,\\s*[^,\\s]{16,}\\s*)*)?$',
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
  LOG_REQUESTS: Type.Boolean({
    default: true,
    description:
      'One info line per answered request; false keeps only errored requests (10 to 25% less CPU per request under load).',
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
      'Failed authentications (401) a client address may have per minute, in a burst or spread out, before its requests get 429 until it may try again; 0 turns this off.',
  }),
  TRUSTED_PROXIES: Type.String({
    default: '',
    pattern: '^[0-9A-Fa-f:.,/\\s]*$',
    description:
      'Addresses or CIDR ranges of the proxies in front of the service, comma-separated (e.g. 10.0.0.0/8); their X-Forwarded-For names the client address. Empty: the connecting address is the client.',
  }),
  REDIS_URL: Type.Optional(
    Type.String({
      pattern: '^rediss?://.+',
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
});

export type Env = Static<typeof EnvSchema>;

export interface Config {
  host: string;
  port: number;
  databaseUrl: string;
  databasePoolSize: number;
  databaseTimeoutMs: number;
  apiKeys: string[];
  publicBaseUrl: string | undefined;
  stagingBaseUrl: string | undefined;
  logLevel: string;
  logRequests: boolean;
  bodyLimit: number;
  corsOrigins: string[];
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  rateLimit: { perSecond: number; burst: number };
  /** Failed authentications per client address: a bucket of `burst`, refilled at `perSecond`; undefined when off. */
  authFailures: { perSecond: number; burst: number } | undefined;
  trustedProxies: string[];
  redisUrl: string | undefined;
  overload: { maxEventLoopDelayMs: number; maxHeapUsedBytes: number };
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Reads and validates the configuration; throws ConfigError naming the offending variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  let parsed: Env;
  try {
    parsed = envSchema<Env>({
      schema: structuredClone(EnvSchema),
      data: pickKnown(env),
      env: false,
      ajv: {
        customOptions: (ajv) => ajv.addFormat('uri', (value: string) => URL.canParse(value)),
      },
    });
  } catch (error) {
    throw new ConfigError(`invalid configuration: ${(error as Error).message}`);
  }
  return {
    host: parsed.HOST,
    port: parsed.PORT,
    databaseUrl: parsed.DATABASE_URL,
    databasePoolSize: parsed.DATABASE_POOL_SIZE,
    databaseTimeoutMs: parsed.DATABASE_TIMEOUT_MS,
    apiKeys: list(parsed.PETSTORE_API_KEYS),
    publicBaseUrl: parsed.PUBLIC_BASE_URL?.replace(/\/$/, ''),
    stagingBaseUrl: parsed.STAGING_BASE_URL?.replace(/\/$/, ''),
    logLevel: parsed.LOG_LEVEL,
    logRequests: parsed.LOG_REQUESTS,
    bodyLimit: parsed.BODY_LIMIT,
    corsOrigins: list(parsed.CORS_ORIGINS),
    headersTimeoutMs: parsed.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: parsed.REQUEST_TIMEOUT_MS,
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
  };
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

/** Name, default and description of each variable, for `petstore --help` and the README. */
export function describeConfig(): { name: string; default: unknown; description: string }[] {
  return Object.entries(EnvSchema.properties).map(([name, schema]) => ({
    name,
    default: (schema as { default?: unknown }).default,
    description: (schema as { description?: string }).description ?? '',
  }));
}
