import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type Config, ConfigError, describeConfig, loadConfig } from '../../src/config/config.js';
import { replicaLabel } from '../../src/storage/postgres/replica-label.js';

const VARIABLES = [
  'HOST',
  'PORT',
  'DATABASE_URL',
  'PETSTORE_API_KEYS',
  'PUBLIC_BASE_URL',
  'STAGING_BASE_URL',
  'LOG_LEVEL',
  'BODY_LIMIT',
] as const;
type Variable = (typeof VARIABLES)[number];

type Settings = Pick<
  Config,
  'host' | 'port' | 'databaseUrl' | 'apiKeys' | 'publicBaseUrl' | 'stagingBaseUrl' | 'logLevel' | 'bodyLimit'
>;

const DEFAULTS: Settings = {
  host: '127.0.0.1',
  port: 3000,
  databaseUrl: 'sqlite:./data/petstore.db',
  apiKeys: [],
  publicBaseUrl: undefined,
  stagingBaseUrl: undefined,
  logLevel: 'info',
  bodyLimit: 65536,
};

const KEY_A = 'key-aaaaaaaaaaaaaaaa';
const KEY_B = 'key-bbbbbbbbbbbbbbbb';

/** The settings this suite is about, from a loaded configuration. */
function settings(env: NodeJS.ProcessEnv): Settings {
  const config = loadConfig(env);
  return {
    host: config.host,
    port: config.port,
    databaseUrl: config.databaseUrl,
    apiKeys: config.apiKeys,
    publicBaseUrl: config.publicBaseUrl,
    stagingBaseUrl: config.stagingBaseUrl,
    logLevel: config.logLevel,
    bodyLimit: config.bodyLimit,
  };
}

/** Asserts that loading throws a ConfigError whose one-line message names `variable` and no other. */
function assertRefused(variable: Variable, value: string): void {
  assert.throws(
    () => loadConfig({ [variable]: value }),
    (error: unknown) => {
      assert.ok(
        error instanceof ConfigError,
        `${variable}=${value}: expected ConfigError, got ${String(error)}`,
      );
      assert.equal(error.name, 'ConfigError');
      assert.ok(error.message.includes(variable), `${variable}=${value}: message "${error.message}"`);
      for (const other of VARIABLES) {
        if (other !== variable && !variable.includes(other)) {
          assert.equal(error.message.includes(other), false, `${variable}=${value} names ${other} too`);
        }
      }
      assert.equal(error.message.includes('\n'), false, `${variable}=${value}: message spans lines`);
      return true;
    },
  );
}

describe('loadConfig', () => {
  test('when no variable is set, then every setting has its documented default', () => {
    assert.deepEqual(settings({}), DEFAULTS);
  });

  test('when every variable is set to a good value, then each is read', () => {
    assert.deepEqual(
      settings({
        HOST: '0.0.0.0',
        PORT: '8080',
        DATABASE_URL: 'postgres://user@db:5432/petstore',
        PETSTORE_API_KEYS: KEY_A,
        PUBLIC_BASE_URL: 'https://api.example.com/v1',
        STAGING_BASE_URL: 'https://staging.example.com/v1',
        LOG_LEVEL: 'warn',
        BODY_LIMIT: '1024',
      }),
      {
        host: '0.0.0.0',
        port: 8080,
        databaseUrl: 'postgres://user@db:5432/petstore',
        apiKeys: [KEY_A],
        publicBaseUrl: 'https://api.example.com/v1',
        stagingBaseUrl: 'https://staging.example.com/v1',
        logLevel: 'warn',
        bodyLimit: 1024,
      },
    );
  });

  test('when METRICS_PORT, METRICS_HOST and DOCS_ENABLED are set or not, then metrics stay on PORT and the docs on by default, and METRICS_HOST defaults to HOST', () => {
    assert.equal(loadConfig({}).metrics, undefined);
    assert.equal(loadConfig({}).docsEnabled, true);
    assert.equal(loadConfig({ DOCS_ENABLED: 'false' }).docsEnabled, false);
    assert.deepEqual(loadConfig({ METRICS_PORT: '9464' }).metrics, { host: '127.0.0.1', port: 9464 });
    assert.deepEqual(loadConfig({ METRICS_PORT: '9464', HOST: '::1' }).metrics, { host: '::1', port: 9464 });
    assert.deepEqual(loadConfig({ METRICS_PORT: '0', METRICS_HOST: '0.0.0.0' }).metrics, {
      host: '0.0.0.0',
      port: 0,
    });
    assert.equal(loadConfig({ METRICS_HOST: '0.0.0.0' }).metrics, undefined, 'a host alone moves nothing');
    for (const [name, value] of [
      ['METRICS_PORT', '65536'],
      ['METRICS_PORT', '-1'],
      ['METRICS_HOST', 'a host'],
      ['DOCS_ENABLED', 'no'],
    ] as const) {
      assert.throws(
        () => loadConfig({ [name]: value }),
        (error: unknown) =>
          error instanceof ConfigError && error.message.startsWith(`invalid configuration: ${name} must be `),
      );
    }
  });

  test('when PORT is at either end of its range, then it is accepted', () => {
    assert.equal(loadConfig({ PORT: '0' }).port, 0);
    assert.equal(loadConfig({ PORT: '65535' }).port, 65535);
  });

  test('when PORT is not a port number, then a ConfigError names PORT', () => {
    for (const value of ['abc', '-1', '65536', '1.5', '3000x']) assertRefused('PORT', value);
  });

  test('when BODY_LIMIT is not an integer between 64 and 16 MiB, then a ConfigError names BODY_LIMIT', () => {
    for (const value of ['abc', '63', '-1', '16777217', '1.5', '64k']) assertRefused('BODY_LIMIT', value);
    assert.equal(loadConfig({ BODY_LIMIT: '64' }).bodyLimit, 64);
    assert.equal(loadConfig({ BODY_LIMIT: '16777216' }).bodyLimit, 16777216);
  });

  test('when LOG_REQUESTS is set, then it is read as a boolean, and anything else is a ConfigError naming it', () => {
    assert.equal(loadConfig({}).logRequests, true);
    assert.equal(loadConfig({ LOG_REQUESTS: 'false' }).logRequests, false);
    assert.equal(loadConfig({ LOG_REQUESTS: 'true' }).logRequests, true);
    assert.throws(
      () => loadConfig({ LOG_REQUESTS: 'maybe' }),
      (error: unknown) => error instanceof ConfigError && error.message.includes('LOG_REQUESTS'),
    );
  });

  test('when LOG_LEVEL is not a pino level, then a ConfigError names LOG_LEVEL', () => {
    for (const value of ['loud', 'verbose', '30']) assertRefused('LOG_LEVEL', value);
    for (const level of ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']) {
      assert.equal(loadConfig({ LOG_LEVEL: level }).logLevel, level);
    }
  });

  test('when DATABASE_URL is not sqlite or postgres, then a ConfigError names DATABASE_URL', () => {
    for (const value of ['mysql://x', 'sqlite:', 'postgres://', 'petstore.db', 'file:./p.db']) {
      assertRefused('DATABASE_URL', value);
    }
  });

  test('when DATABASE_URL is sqlite, sqlite memory or postgres, then it is kept as given', () => {
    for (const value of [
      'sqlite:/tmp/p.db',
      'sqlite::memory:',
      'postgres://u:p@h:5432/d',
      'postgresql://u@h/d',
    ]) {
      assert.equal(loadConfig({ DATABASE_URL: value }).databaseUrl, value);
    }
  });

  test('when PETSTORE_API_KEYS lists keys with spaces around commas, then they are split and trimmed', () => {
    assert.deepEqual(loadConfig({ PETSTORE_API_KEYS: `  ${KEY_A} ,${KEY_B}  ` }).apiKeys, [KEY_A, KEY_B]);
    assert.deepEqual(loadConfig({ PETSTORE_API_KEYS: KEY_A }).apiKeys, [KEY_A]);
  });

  test('when a key in PETSTORE_API_KEYS is shorter than 16 characters, then a ConfigError names PETSTORE_API_KEYS', () => {
    assert.deepEqual(loadConfig({ PETSTORE_API_KEYS: '0123456789abcdef' }).apiKeys, ['0123456789abcdef']);
    for (const value of ['short', '0123456789abcde', `${KEY_A},short`, `${KEY_A},,${KEY_B}`]) {
      assertRefused('PETSTORE_API_KEYS', value);
    }
  });

  for (const variable of ['PUBLIC_BASE_URL', 'STAGING_BASE_URL'] as const) {
    const field = variable === 'PUBLIC_BASE_URL' ? 'publicBaseUrl' : 'stagingBaseUrl';

    test(`when ${variable} is an http(s) address ending in /v1, then it is kept without a trailing slash`, () => {
      for (const [value, expected] of [
        ['https://api.example.com/v1', 'https://api.example.com/v1'],
        ['https://api.example.com/v1/', 'https://api.example.com/v1'],
        ['http://localhost:8080/v1', 'http://localhost:8080/v1'],
        ['https://example.com/petstore/v1/', 'https://example.com/petstore/v1'],
      ] as const) {
        assert.equal(loadConfig({ [variable]: value })[field], expected, value);
      }
    });

    test(`when ${variable} is not an http(s) address ending in /v1, then a ConfigError names ${variable}`, () => {
      for (const value of [
        'not-a-url',
        'ftp://api.example.com/v1',
        'https://api.example.com',
        'https://api.example.com/',
        'https://api.example.com/v2',
        'https://api.example.com/v1?x=1',
        'https://api.example.com/v1#top',
        '/v1',
        // Header injection: each would be written raw into Location and Link.
        'https://api.example.com/x>; rel="preload", <https://evil.example/v1',
        'https://api.example.com/a b/v1',
        'https://api.example.com/"q"/v1',
        'https://api.example.com/é/v1',
        'https://api.example.com/a\r\nSet-Cookie: x=1/v1',
        'https://user:secret@api.example.com/v1',
        'https://API.example.com/v1',
        'https://api.example.com/./v1',
      ]) {
        assertRefused(variable, value);
      }
    });
  }

  test('when unknown variables are set, then they are ignored', () => {
    assert.deepEqual(
      settings({ NODE_ENV: 'production', PORT2: 'abc', port: 'abc', FOO: 'bar', PATH: '/usr/bin' }),
      DEFAULTS,
    );
  });

  test('when a variable is set to the empty string, then its default applies', () => {
    assert.deepEqual(
      settings({
        HOST: '',
        PORT: '',
        DATABASE_URL: '',
        PETSTORE_API_KEYS: '',
        LOG_LEVEL: '',
        BODY_LIMIT: '',
      }),
      DEFAULTS,
    );
  });

  test('when loadConfig is given an environment, then it does not read process.env', () => {
    const saved = process.env.PORT;
    process.env.PORT = 'abc';
    try {
      assert.equal(loadConfig({}).port, 3000);
    } finally {
      if (saved === undefined) delete process.env.PORT;
      else process.env.PORT = saved;
    }
  });
});

test('when any variable has a bad value, then the error says what a valid one looks like, not a JSON Schema keyword nor the value', () => {
  let refused = 0;
  for (const { name } of describeConfig()) {
    let message: string | undefined;
    try {
      loadConfig({ [name]: 'nope!' });
    } catch (error) {
      assert.ok(error instanceof ConfigError);
      message = error.message;
    }
    if (message === undefined) continue; // any text is a valid HOST
    refused++;
    assert.match(message, new RegExp(`^invalid configuration: ${name} must be \\S`));
    assert.doesNotMatch(message, /nope|pattern|constant|anyOf|undefined|\benv\//, message);
  }
  assert.equal(refused, describeConfig().length - 1);
});

test('when a replica URL holds a password with an unescaped / or #, then the configuration is refused without showing it; a clean one names host, port and database only', () => {
  const primary = 'postgres://app@127.0.0.1:5432/petstore';
  for (const replica of [
    'postgres://postgres:2024/Hunter2Secret@127.0.0.1:5432/petstore',
    'postgres://postgres:pa#ss@127.0.0.1/petstore',
  ]) {
    assert.throws(
      () =>
        loadConfig({
          DATABASE_URL: primary,
          DATABASE_REPLICA_URLS: `postgres://r0:5432/petstore,${replica}`,
        }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.match(
          error.message,
          /^invalid configuration: DATABASE_REPLICA_URLS: URL 2 is not a postgres:/,
        );
        assert.doesNotMatch(error.message, /Hunter2|pa#ss/);
        return true;
      },
    );
  }
  const clean = 'postgres://postgres:2024%2FHunter2Secret@replica-2:6543/petstore?sslmode=require';
  assert.deepEqual(loadConfig({ DATABASE_URL: primary, DATABASE_REPLICA_URLS: clean }).databaseReplicaUrls, [
    clean,
  ]);
  assert.equal(replicaLabel(clean), 'replica-2:6543/petstore');
  assert.equal(replicaLabel('postgres://replica-3'), 'replica-3:5432');
});
