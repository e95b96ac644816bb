import { Command } from 'commander';
import { API_KEY_SCOPES, expiryOf, keyStatus, newApiKey, parseScopes } from '../domain/api-keys.js';
import type { ApiKeyRecord } from '../domain/storage.js';
import type { CliIo } from './io.js';
import { withStorage } from './with-storage.js';

interface CreateOptions {
  name: string;
  scopes?: string;
  expiresIn?: string;
  expiresAt?: string;
}

export function keysCommand(io: CliIo): Command {
  const keys = new Command('keys').description('manage API keys (create, list, revoke)');

  keys
    .command('create')
    .description('create a key and print it once; only its hash is stored')
    .option('-n, --name <name>', 'what the key is for', 'unnamed')
    .option(
      '--scopes <list>',
      `what it may do, comma-separated (default: all of ${API_KEY_SCOPES.join(',')})`,
    )
    .option('--expires-in <duration>', 'stop working after this long: 30m, 12h, 90d, 2w')
    .option('--expires-at <date-time>', 'stop working at this RFC 3339 instant, e.g. 2027-03-31T00:00:00Z')
    .action(async ({ name, scopes, expiresIn, expiresAt }: CreateOptions) => {
      const now = new Date();
      // Everything is checked before the database is opened: a refused key leaves nothing behind.
      const grant = {
        scopes: scopes === undefined ? API_KEY_SCOPES : parseScopes(scopes),
        expiresAt: expiryOf({ expiresIn, expiresAt }, now),
      };
      const key = newApiKey(name, now, grant);
      await withStorage(io, (storage) => storage.apiKeys.insert(key.record));
      const expiry = key.record.expiresAt ? `, expires ${key.record.expiresAt.toISOString()}` : '';
      io.stderr.write(
        `created ${key.record.id} (${name}; ${key.record.scopes.join(',')}${expiry}); the key is shown only this once:\n`,
      );
      io.stdout.write(`${key.secret}\n`);
    });

  keys
    .command('list')
    .description('list keys: scopes, expiry, last use (never their secrets)')
    .option('--json', 'print JSON instead of a table')
    .action(async ({ json }: { json?: boolean }) => {
      const records = await withStorage(io, (storage) => storage.apiKeys.list());
      const now = new Date();
      io.stdout.write(
        json
          ? `${JSON.stringify(
              records.map((key) => publicView(key, now)),
              null,
              2,
            )}\n`
          : table(records, now),
      );
    });

  keys
    .command('revoke')
    .description('revoke a key at once; every node refuses it within seconds')
    .argument('<id>', 'the key id, as `keys list` shows it')
    .action(async (id: string) => {
      const revoked = await withStorage(io, (storage) => storage.apiKeys.revoke(id, new Date()));
      if (!revoked) throw new Error(`no active key with id ${id}`);
      io.stderr.write(`revoked ${id}\n`);
    });

  return keys;
}

const publicView = (key: ApiKeyRecord, now: Date) => ({
  id: key.id,
  name: key.name,
  key: `pst_…${key.hint}`,
  scopes: key.scopes,
  createdAt: key.createdAt.toISOString(),
  expiresAt: key.expiresAt?.toISOString() ?? null,
  lastUsedAt: key.lastUsedAt?.toISOString() ?? null,
  revokedAt: key.revokedAt?.toISOString() ?? null,
  status: keyStatus(key, now),
});

/** To the minute, in UTC: last use is recorded about once a minute, and seconds only add noise. */
const minute = (instant: Date | undefined, never: string) =>
  instant === undefined ? never : `${instant.toISOString().slice(0, 16).replace('T', ' ')}Z`;

function table(records: ApiKeyRecord[], now: Date): string {
  if (records.length === 0) return 'no keys\n';
  const rows = [
    ['ID', 'NAME', 'KEY', 'SCOPES', 'CREATED', 'EXPIRES', 'LAST USED', 'STATUS'],
    ...records.map((key) => {
      const status = keyStatus(key, now);
      return [
        key.id,
        key.name,
        `pst_…${key.hint}`,
        key.scopes.length === API_KEY_SCOPES.length ? 'all' : key.scopes.join(',') || 'none',
        minute(key.createdAt, ''),
        minute(key.expiresAt, 'never'),
        minute(key.lastUsedAt, 'never'),
        status === 'revoked' ? `revoked ${key.revokedAt?.toISOString().slice(0, 10)}` : status,
      ];
    }),
  ];
  const widths =
    rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  return `${rows
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}
