/**
 * A real PostgreSQL primary and a streaming replica of it, for the tests of read replicas: made with
 * the server's own tools (initdb, pg_basebackup, pg_ctl, found under /usr/lib/postgresql/<version>/bin,
 * installed with the server), in a temporary folder, on free ports, without Docker. One pair per
 * process, started on first use and shared by every test that asks for it; stopped and removed when
 * the process exits. A pair that cannot be started fails the test that asked: it is never skipped.
 */
import { type SpawnSyncOptions, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

export interface ReplicationPair {
  /** The primary's `postgres` database, as the superuser `postgres` (trust). */
  primaryUrl: string;
  /** Their data directories (each holds postmaster.pid): to measure the servers' CPU. */
  directories: { primary: string; replica: string };
  /** The same URL (path, options) on the replica. */
  onReplica(url: string): string;
  /** Runs one statement on the replica's `postgres` database and returns its rows. */
  queryReplica<T extends pg.QueryResultRow>(sql: string, url?: string): Promise<T[]>;
  /** Replay stops where it is (pg_wal_replay_pause): the replica falls behind on purpose. */
  pauseReplay(): Promise<void>;
  /** Replay goes on, and this resolves once it has replayed everything the primary had written. */
  resumeReplay(): Promise<void>;
  /** `pg_ctl stop -m immediate`: the replica vanishes as if its machine had died. */
  stopReplica(): void;
  /** Starts the replica again (on the same port); resolves once it accepts queries. */
  startReplica(): Promise<void>;
}

let started: Promise<ReplicationPair> | undefined;

/** The one pair of this process, started on first call. */
export function replicationPair(): Promise<ReplicationPair> {
  started ??= startPair();
  return started;
}

function binaries(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((version) => existsSync(join(root, version, 'bin', 'pg_basebackup')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (!versions[0])
    throw new Error(`no PostgreSQL server binaries (initdb, pg_basebackup) under ${root}/<version>/bin`);
  return join(root, versions[0], 'bin');
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
    server.on('error', reject);
  });
}

/** The server refuses to run as root: as root, its tools run as the `postgres` user. */
const AS_ROOT = process.getuid?.() === 0;

function run(bin: string, tool: string, args: string[], options: SpawnSyncOptions = {}): void {
  const [command, argv] = AS_ROOT
    ? ['runuser', ['-u', 'postgres', '--', join(bin, tool), ...args]]
    : [join(bin, tool), args];
  const result = spawnSync(command, argv, { encoding: 'utf8', timeout: 60_000, ...options });
  if (result.status !== 0)
    throw new Error(
      `${tool} ${args.join(' ')} failed (${result.error?.message ?? `exit ${result.status}`}): ${result.stderr}`,
    );
}

function ownedByPostgres(path: string): void {
  if (!AS_ROOT) return;
  const id = (flag: string) =>
    Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  chownSync(path, id('-u'), id('-g'));
}

/** Server settings on the command line: small, quick, local, and ready to stream its WAL. */
const serverOptions = (dir: string, port: number) =>
  [
    `-p ${port}`,
    '-c listen_addresses=127.0.0.1',
    `-c unix_socket_directories=${dir}`,
    '-c fsync=off',
    '-c shared_buffers=16MB',
    '-c max_connections=200',
    '-c wal_level=replica',
    '-c max_wal_senders=4',
    '-c hot_standby=on',
    // What each statement costs, on the primary and on the replica: the capacity model reads it
    // (bench/capacity.ts), with `CREATE EXTENSION pg_stat_statements` in its database.
    '-c shared_preload_libraries=pg_stat_statements',
  ].join(' ');

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

async function untilAnswers(url: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await query(url, 'SELECT 1');
      return;
    } catch (error) {
      if (attempt > 200) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

async function startPair(): Promise<ReplicationPair> {
  const bin = binaries();
  const dir = mkdtempSync(join(tmpdir(), 'petstore-replication-'));
  ownedByPostgres(dir);
  const primaryDir = join(dir, 'primary');
  const replicaDir = join(dir, 'replica');
  const [primaryPort, replicaPort] = [await freePort(), await freePort()];
  const stop = (data: string) =>
    spawnSync(AS_ROOT ? 'runuser' : join(bin, 'pg_ctl'), [
      ...(AS_ROOT ? ['-u', 'postgres', '--', join(bin, 'pg_ctl')] : []),
      '-D',
      data,
      '-m',
      'immediate',
      'stop',
    ]);
  const cleanUp = () => {
    for (const data of [replicaDir, primaryDir]) if (existsSync(join(data, 'postmaster.pid'))) stop(data);
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', cleanUp);
  try {
    run(bin, 'initdb', ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
    appendFileSync(join(primaryDir, 'pg_hba.conf'), '\nhost replication all 127.0.0.1/32 trust\n');
    const startServer = (data: string, port: number) =>
      run(bin, 'pg_ctl', ['-D', data, '-l', `${data}.log`, '-o', serverOptions(dir, port), '-w', 'start']);
    startServer(primaryDir, primaryPort);
    run(bin, 'pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '-D',
      replicaDir,
      '-R',
      '--checkpoint=fast',
      '--no-sync',
    ]);
    startServer(replicaDir, replicaPort);
    const primaryUrl = `postgres://postgres@127.0.0.1:${primaryPort}/postgres`;
    const onReplica = (url: string) => {
      const copy = new URL(url);
      copy.port = String(replicaPort);
      return copy.href;
    };
    const replicaUrl = onReplica(primaryUrl);
    await untilAnswers(replicaUrl);
    const queryReplica = <T extends pg.QueryResultRow>(sql: string, url = replicaUrl) =>
      query<T>(onReplica(url), sql);
    return {
      primaryUrl,
      directories: { primary: primaryDir, replica: replicaDir },
      onReplica,
      queryReplica,
      async pauseReplay() {
        await queryReplica('SELECT pg_wal_replay_pause()');
      },
      async resumeReplay() {
        await queryReplica('SELECT pg_wal_replay_resume()');
        const [{ lsn } = { lsn: '0/0' }] = await query<{ lsn: string }>(
          primaryUrl,
          'SELECT pg_current_wal_lsn()::text AS lsn',
        );
        for (;;) {
          const [row] = await queryReplica<{ caught: boolean }>(
            `SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn AS caught`,
          );
          if (row?.caught) return;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      },
      stopReplica() {
        stop(replicaDir);
      },
      async startReplica() {
        startServer(replicaDir, replicaPort);
        await untilAnswers(replicaUrl);
      },
    };
  } catch (error) {
    const logs = [primaryDir, replicaDir]
      .map((data) => `${data}.log`)
      .filter((log) => existsSync(log))
      .map((log) => `${log}:\n${readFileSync(log, 'utf8').slice(-2_000)}`)
      .join('\n');
    cleanUp();
    throw new Error(`could not start a PostgreSQL primary and replica: ${(error as Error).message}\n${logs}`);
  }
}
