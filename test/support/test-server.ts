import { readFileSync } from 'node:fs';
import { Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { parse } from 'lossless-json';
import { type AppOptions, buildApp } from '../../src/app.js';
import { type Config, loadConfig } from '../../src/config/config.js';
import type { Storage } from '../../src/domain/storage.js';
import { openRedis, redisWanted } from '../../src/redis.js';
import { openStorage } from '../../src/storage/open-storage.js';
import { type Backend, sqlite, type TestDatabase } from './backends.js';
import { OpenApiContract } from './openapi-contract.js';

/** The key every test server accepts (through PETSTORE_API_KEYS). */
export const TEST_KEY = 'test-key-0123456789abcdef';

export interface TestResponse {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed with JSON.parse (int64 values beyond 2^53 are rounded: use `exact`). */
  json: <T = unknown>() => T;
  /** The body parsed keeping every integer exact (bigint beyond 2^53). */
  exact: <T = unknown>() => T;
}

export interface RequestOptions {
  /** A value to send as JSON, or a string/Buffer sent as it is. */
  body?: unknown;
  headers?: Record<string, string>;
  /** The bearer key; null sends no Authorization header. Defaults to TEST_KEY. */
  key?: string | null;
  /** Give up (the request rejects) after this many milliseconds: for answers that must come in time. */
  timeoutMs?: number;
}

export interface TestServer {
  url: string;
  app: FastifyInstance;
  storage: Storage;
  database: TestDatabase;
  contract: OpenApiContract;
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface TestServerOptions {
  backend?: Backend;
  /** Environment variables on top of the test defaults. */
  env?: Record<string, string>;
  now?: () => Date;
  /** Reuse a database (e.g. a second node on the same one). */
  database?: TestDatabase;
  /** A logger configuration (e.g. one writing to a stream the test reads); silent otherwise. */
  logger?: AppOptions['logger'];
  /** The storage the app is given, made from the one opened (e.g. one counting its calls). */
  wrapStorage?: (storage: Storage) => Storage;
  /** `serve --role`: a delivery process serves no API (and so no OpenAPI document: the file's is checked against). */
  role?: AppOptions['role'];
  /** `--role all` delivering on a thread of its own, as `petstore serve` does (it ignores `now` and `wrapStorage`). */
  deliveryThread?: boolean;
}

export function testConfig(url: string, env: Record<string, string> = {}): Config {
  return loadConfig({
    DATABASE_URL: url,
    PETSTORE_API_KEYS: TEST_KEY,
    LOG_LEVEL: 'silent',
    PORT: '0',
    // Off unless a test is about it: suites that fire many requests must not be throttled.
    RATE_LIMIT_PER_SECOND: '0',
    AUTH_FAILURES_PER_MINUTE: '0',
    // Load shedding too: on a busy machine event-loop lag would answer 503 where a test expects its answer.
    OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
    ...env,
  });
}

/**
 * Closes, at once, the connections the test left idle (fetch keeps them alive), as a client that is
 * done would: otherwise closing the server waits out its drain grace (DRAIN_GRACE_MS) for them, a
 * second for every server a test starts. Node's own closeIdleConnections does this; the service's
 * server overrides it to drain instead, which is what the service must do and not what a finished
 * test needs. Connections with a request in flight are left to the drain.
 */
function closeIdleConnections(app: FastifyInstance): void {
  Server.prototype.closeIdleConnections.call(app.server);
}

/** The document of what a delivery process serves: the API's, its probes and /metrics alone. */
function probesOnly(): Record<string, unknown> {
  const document = JSON.parse(readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8')) as {
    paths: Record<string, unknown>;
  };
  const kept = ['/healthz', '/readyz', '/metrics'];
  return {
    ...document,
    paths: Object.fromEntries(Object.entries(document.paths).filter(([path]) => kept.includes(path))),
  };
}

/** Starts the real service on port 0 against a fresh database; every response is checked against its OpenAPI document. */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const database = options.database ?? (await (options.backend ?? sqlite).create());
  const config = testConfig(database.url, options.env);
  const now = options.now;
  // The same clock for the key cache as for the app: a test moving it moves both.
  const redisUrl = redisWanted(config);
  const redis = redisUrl ? await openRedis(redisUrl) : undefined;
  const storage = await openStorage(config, now ? () => now().getTime() : Date.now, redis);
  const app = await buildApp({
    redis,
    config,
    storage: options.wrapStorage ? options.wrapStorage(storage) : storage,
    ...(options.now ? { now: options.now } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.role ? { role: options.role } : {}),
    ...(options.deliveryThread ? { deliveryThread: true } : {}),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const contract = new OpenApiContract(
    options.role === 'deliver'
      ? probesOnly()
      : ((await (await fetch(`${url}/v1/openapi.json`)).json()) as Record<string, unknown>),
  );

  const request = async (method: string, path: string, opts: RequestOptions = {}): Promise<TestResponse> => {
    const headers: Record<string, string> = {};
    const key = opts.key === undefined ? TEST_KEY : opts.key;
    if (key !== null) headers.authorization = `Bearer ${key}`;
    let body: string | Buffer | undefined;
    if (opts.body !== undefined) {
      body =
        typeof opts.body === 'string' || Buffer.isBuffer(opts.body) ? opts.body : JSON.stringify(opts.body);
      headers['content-type'] = 'application/json';
    }
    Object.assign(headers, opts.headers);
    const res = await fetch(`${url}${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
      ...(opts.timeoutMs === undefined ? {} : { signal: AbortSignal.timeout(opts.timeoutMs) }),
    });
    const text = await res.text();
    contract.check(method, path, res.status, res.headers.get('content-type'), text);
    return {
      status: res.status,
      headers: res.headers,
      text,
      json: <T>() => JSON.parse(text) as T,
      exact: <T>() =>
        parse(text, null, (n) => (Number.isSafeInteger(Number(n)) ? Number(n) : BigInt(n))) as T,
    };
  };

  return {
    url,
    app,
    storage,
    database,
    contract,
    request,
    close: async () => {
      closeIdleConnections(app);
      await app.close();
      await storage.close();
      await redis?.close();
      if (!options.database) await database.drop();
    },
  };
}
