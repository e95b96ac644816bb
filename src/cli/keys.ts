import { Command } from 'commander';
import { newApiKey } from '../domain/api-keys.js';
import type { ApiKeyRecord } from '../domain/storage.js';
import { withStorage } from './with-storage.js';

export function keysCommand(): Command {
  const keys = new Command('keys').description('manage API keys (create, list, revoke)');

  keys
    .command('create')
    .description('create a key and print it once; only its hash is stored')
    .option('-n, --name <name>', 'what the key is for', 'unnamed')
    .action(async ({ name }: { name: string }) => {
      const key = newApiKey(name, new Date());
      await withStorage((storage) => storage.apiKeys.insert(key.record));
      process.stderr.write(`created ${key.record.id} (${name}); the key is shown only this once:\n`);
      process.stdout.write(`${key.secret}\n`);
    });

  keys
    .command('list')
    .description('list keys (never their secrets)')
    .option('--json', 'print JSON instead of a table')
    .action(async ({ json }: { json?: boolean }) => {
      const records = await withStorage((storage) => storage.apiKeys.list());
      process.stdout.write(json ? `${JSON.stringify(records.map(publicView), null, 2)}\n` : table(records));
    });

  keys
    .command('revoke')
    .description('revoke a key at once; every node refuses it within seconds')
    .argument('<id>', 'the key id, as `keys list` shows it')
    .action(async (id: string) => {
      const revoked = await withStorage((storage) => storage.apiKeys.revoke(id, new Date()));
      if (!revoked) throw new Error(`no active key with id ${id}`);
      process.stderr.write(`revoked ${id}\n`);
    });

  return keys;
}

const publicView = (key: ApiKeyRecord) => ({
  id: key.id,
  name: key.name,
  key: `pst_…${key.hint}`,
  createdAt: key.createdAt.toISOString(),
  revokedAt: key.revokedAt?.toISOString() ?? null,
});

function table(records: ApiKeyRecord[]): string {
  if (records.length === 0) return 'no keys\n';
  const rows = [
    ['ID', 'NAME', 'KEY', 'CREATED', 'STATUS'],
    ...records.map((key) => [
      key.id,
      key.name,
      `pst_…${key.hint}`,
      key.createdAt.toISOString().slice(0, 19).replace('T', ' '),
      key.revokedAt ? `revoked ${key.revokedAt.toISOString().slice(0, 10)}` : 'active',
    ]),
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
