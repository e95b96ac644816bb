import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, describe, test } from 'node:test';
import {
  type CliResult,
  killAllCliProcesses,
  oneLineFailure,
  runInProcess,
  type TempDatabase,
} from '../support/cli.js';
import { createKey, database, KEY, type ListedKey, listKeys } from '../support/cli-commands.js';

/** `petstore keys create`, `list` and `revoke`. */

after(() => killAllCliProcesses());

/** A failed run of a command that opened the database: `database: <path>` first, then one line saying what failed. */
function failureAfterOpening(result: CliResult, db: TempDatabase): string {
  const [opened, ...rest] = result.stderr.split('\n');
  assert.equal(opened, `database: ${db.path}`);
  return oneLineFailure({ ...result, stderr: rest.join('\n') });
}

describe('petstore keys', { concurrency: 4 }, () => {
  test('when keys create --name ci runs, then it prints one pst_ key on stdout and exits 0', async (t) => {
    const db = await database(t);
    const result = await runInProcess(['keys', 'create', '--name', 'ci'], { DATABASE_URL: db.url });
    assert.equal(result.code, 0, result.stderr);
    const lines = result.stdout.split('\n');
    assert.equal(lines.length, 2, `stdout: ${JSON.stringify(result.stdout)}`);
    assert.equal(lines[1], '');
    assert.match(lines[0] as string, KEY);
    assert.equal(result.stderr.includes(lines[0] as string), false);
    const [listed] = await listKeys(db);
    assert.equal(listed?.name, 'ci');
  });

  test('when keys list runs, then it shows each key id, name and pst_…last4, never the secret', async (t) => {
    const db = await database(t);
    const secret = await createKey(db, 'ci');
    const [record] = await listKeys(db);
    assert.ok(record);
    const result = await runInProcess(['keys', 'list'], { DATABASE_URL: db.url });
    assert.equal(result.code, 0, result.stderr);
    const [header, row, ...rest] = result.stdout.trimEnd().split('\n');
    assert.deepEqual(rest, []);
    assert.match(header ?? '', /^ID\s+NAME\s+KEY\s+SCOPES\s+CREATED\s+EXPIRES\s+LAST USED\s+STATUS$/);
    assert.match(
      row ?? '',
      new RegExp(
        `^${record.id}\\s+ci\\s+pst_…${secret.slice(-4)}\\s+all\\s+\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}Z\\s+never\\s+never\\s+active$`,
      ),
    );
    assert.equal(result.stdout.includes(secret), false);
    assert.equal(result.stdout.includes(secret.slice(4, -4)), false);
    assert.equal(result.stdout.includes(createHash('sha256').update(secret).digest('hex')), false);
  });

  test('when keys list --json runs, then it prints every key as JSON without its secret', async (t) => {
    const db = await database(t);
    const ci = await createKey(db, 'ci');
    const deploy = await createKey(db, 'deploy');
    const result = await runInProcess(['keys', 'list', '--json'], { DATABASE_URL: db.url });
    assert.equal(result.code, 0, result.stderr);
    const keys = JSON.parse(result.stdout) as ListedKey[];
    assert.equal(keys.length, 2);
    const byName = new Map(keys.map((k) => [k.name, k]));
    for (const [name, secret] of [
      ['ci', ci],
      ['deploy', deploy],
    ] as const) {
      const key = byName.get(name);
      assert.ok(key, `${name} is not listed`);
      assert.deepEqual(Object.keys(key).sort(), [
        'createdAt',
        'expiresAt',
        'id',
        'key',
        'lastUsedAt',
        'name',
        'revokedAt',
        'scopes',
        'status',
      ]);
      assert.deepEqual(key.scopes, [
        'pets:read',
        'pets:write',
        'orders:read',
        'orders:write',
        'events:read',
        'webhooks:read',
        'webhooks:write',
      ]);
      assert.deepEqual([key.expiresAt, key.lastUsedAt, key.status], [null, null, 'active']);
      assert.match(key.id, /^\S+$/);
      assert.equal(key.key, `pst_…${secret.slice(-4)}`);
      assert.equal(new Date(key.createdAt).toISOString(), key.createdAt);
      assert.equal(key.revokedAt, null);
      assert.equal(result.stdout.includes(secret), false);
    }
    assert.notEqual(byName.get('ci')?.id, byName.get('deploy')?.id);
    assert.notEqual(ci, deploy);
  });

  test('when there is no key, then keys list says so and --json prints an empty array', async (t) => {
    const db = await database(t);
    const table = await runInProcess(['keys', 'list'], { DATABASE_URL: db.url });
    assert.equal(table.code, 0, table.stderr);
    assert.equal(table.stdout, 'no keys\n');
    assert.deepEqual(await listKeys(db), []);
  });

  test('when keys revoke <id> runs, then it exits 0 and keys list shows the key as revoked', async (t) => {
    const db = await database(t);
    await createKey(db, 'ci');
    await createKey(db, 'other');
    const id = (await listKeys(db)).find((k) => k.name === 'ci')?.id as string;
    const result = await runInProcess(['keys', 'revoke', id], { DATABASE_URL: db.url });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, new RegExp(`revoked ${id}`));

    const keys = await listKeys(db);
    const revoked = keys.find((k) => k.id === id);
    assert.ok(revoked?.revokedAt, 'revokedAt is not set');
    assert.equal(new Date(revoked.revokedAt).toISOString(), revoked.revokedAt);
    assert.equal(keys.find((k) => k.name === 'other')?.revokedAt, null);

    const table = await runInProcess(['keys', 'list'], { DATABASE_URL: db.url });
    const rows = table.stdout.split('\n');
    assert.match(rows.find((row) => row.startsWith(id)) ?? '', /\srevoked \d{4}-\d{2}-\d{2}$/);
    assert.match(rows.find((row) => /\sother\s/.test(row)) ?? '', /\sactive$/);
  });

  test("when keys are created with --scopes, --expires-in and --expires-at, then keys list shows each one's scopes, expiry and status, aligned, and --json the same", async (t) => {
    const db = await database(t);
    const before = Date.now();
    const run = (args: string[]) => runInProcess(['keys', 'create', ...args], { DATABASE_URL: db.url });
    const storefront = await run(['--name', 'storefront', '--scopes', 'pets:read,orders:write,orders:read']);
    assert.equal(storefront.code, 0, storefront.stderr);
    assert.match(
      storefront.stderr,
      new RegExp(
        `^database: ${db.path}\ncreated key_\\w+ \\(storefront; pets:read,orders:read,orders:write\\); the key is shown only this once:\n$`,
      ),
    );
    const partner = await run(['--name', 'partner', '--scopes', 'pets:read', '--expires-in', '90d']);
    assert.equal(partner.code, 0, partner.stderr);
    const season = await run(['--name', 'season', '--expires-at', '2031-03-31T02:00:00+02:00']);
    assert.equal(season.code, 0, season.stderr);
    assert.match(
      season.stderr,
      /\(season; pets:read,pets:write,orders:read,orders:write,events:read,webhooks:read,webhooks:write, expires 2031-03-31T00:00:00.000Z\)/,
    );
    for (const result of [storefront, partner, season]) assert.match(result.stdout.trim(), KEY);

    const listed = new Map((await listKeys(db)).map((key) => [key.name, key]));
    assert.deepEqual(listed.get('storefront')?.scopes, ['pets:read', 'orders:read', 'orders:write']);
    assert.equal(listed.get('storefront')?.expiresAt, null);
    assert.deepEqual(listed.get('partner')?.scopes, ['pets:read']);
    const partnerExpiry = Date.parse(listed.get('partner')?.expiresAt ?? '');
    const ninetyDays = 90 * 86_400_000;
    assert.ok(partnerExpiry >= before + ninetyDays && partnerExpiry <= Date.now() + ninetyDays, 'in 90 days');
    assert.equal(listed.get('season')?.expiresAt, '2031-03-31T00:00:00.000Z');
    for (const key of listed.values()) assert.equal(key.status, 'active');

    const table = await runInProcess(['keys', 'list'], { DATABASE_URL: db.url });
    assert.equal(table.code, 0, table.stderr);
    const lines = table.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 4);
    // Aligned: every column starts at the same place on every line.
    const header = lines[0] as string;
    for (const column of ['NAME', 'KEY', 'SCOPES', 'CREATED', 'EXPIRES', 'LAST USED', 'STATUS']) {
      const at = header.indexOf(column);
      for (const line of lines.slice(1))
        assert.match(line.slice(at - 2, at), /^ {2}$/, `${column} in ${line}`);
    }
    const row = (name: string) => lines.find((line) => line.includes(`  ${name}  `)) ?? '';
    assert.match(row('storefront'), /\spets:read,orders:read,orders:write\s.*\snever\s+never\s+active$/);
    assert.match(row('partner'), /\spets:read\s.*\s\d{4}-\d{2}-\d{2} \d{2}:\d{2}Z\s+never\s+active$/);
    assert.match(row('season'), /\sall\s.*\s2031-03-31 00:00Z\s+never\s+active$/);
  });

  for (const [args, message] of [
    [
      ['--scopes', 'pets:delete'],
      /^petstore: unknown scope pets:delete; scopes are pets:read, pets:write, orders:read, orders:write, events:read, webhooks:read, webhooks:write$/,
    ],
    [['--scopes', 'pets:read,,orders:read'], /^petstore: --scopes must be a comma-separated list of /],
    [
      ['--expires-in', '90'],
      /^petstore: --expires-in must be a whole number and a unit \(m, h, d or w\), e\.g\. 90d; got "90"$/,
    ],
    [['--expires-in', '1y'], /^petstore: --expires-in must be .*; got "1y"$/],
    [
      ['--expires-at', '2020-01-01T00:00:00Z'],
      /^petstore: the expiry 2020-01-01T00:00:00.000Z is not in the future$/,
    ],
    [['--expires-at', '2031-02-30T00:00:00Z'], /^petstore: --expires-at must be an RFC 3339 date-time/],
    [['--expires-at', '31/03/2031'], /^petstore: --expires-at must be an RFC 3339 date-time/],
    [
      ['--expires-in', '1d', '--expires-at', '2031-01-01T00:00:00Z'],
      /^petstore: give --expires-in or --expires-at, not both$/,
    ],
  ] as const) {
    test(`when keys create is given ${args.join(' ')}, then one line on stderr, a non-zero exit and no key stored`, async (t) => {
      const db = await database(t);
      const line = oneLineFailure(
        await runInProcess(['keys', 'create', '--name', 'bad', ...args], { DATABASE_URL: db.url }),
      );
      assert.match(line, message);
      assert.doesNotMatch(line, /pst_|\bat \S+:\d+/);
      assert.deepEqual(await listKeys(db), []);
    });
  }

  test('when keys revoke is given an unknown id, then it prints one clear line on stderr and exits non-zero', async (t) => {
    const db = await database(t);
    await createKey(db, 'ci');
    const result = await runInProcess(['keys', 'revoke', 'key_doesnotexist'], { DATABASE_URL: db.url });
    const line = failureAfterOpening(result, db);
    assert.match(line, /key_doesnotexist/);
    assert.doesNotMatch(line, /\bat \S+:\d+/);
    assert.equal((await listKeys(db))[0]?.revokedAt, null);
  });

  test('when a revoked key is revoked again, then it prints one line on stderr and exits non-zero', async (t) => {
    const db = await database(t);
    await createKey(db, 'ci');
    const id = (await listKeys(db))[0]?.id as string;
    assert.equal((await runInProcess(['keys', 'revoke', id], { DATABASE_URL: db.url })).code, 0);
    const line = failureAfterOpening(
      await runInProcess(['keys', 'revoke', id], { DATABASE_URL: db.url }),
      db,
    );
    assert.match(line, new RegExp(id));
  });
});
