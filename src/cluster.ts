import cluster, { type Worker } from 'node:cluster';
import type { Config } from './config/config.js';
import { announceFirstKey, serverUrl } from './server.js';
import { openStorage } from './storage/open-storage.js';

/**
 * The primary of `petstore serve --workers N`. N worker processes listen on one port; node:cluster's
 * primary accepts each connection and hands it to the next worker in turn. The primary serves nothing
 * itself: it migrates the database once before any worker opens it (so workers never race to migrate a
 * SQLite file), creates the first API key once, replaces a worker that dies after it started serving,
 * and on SIGTERM or SIGINT tells every worker to drain and exits when they all have.
 */
export async function runCluster(config: Config, workers: number): Promise<void> {
  if (config.databaseUrl === 'sqlite::memory:') {
    throw new Error(
      '--workers needs a database the workers share; sqlite::memory: is private to each process',
    );
  }
  const storage = await openStorage(config);
  let url: string;
  try {
    url = await startWorkers(config, workers);
    await announceFirstKey(storage.apiKeys, config, url);
  } finally {
    await storage.close();
  }
  process.stderr.write(`petstore: ${workers} workers listening on ${url}\n`);
}

/** Forks the workers; resolves with the service's address once every one of them listens. */
function startWorkers(config: Config, count: number): Promise<string> {
  const serving = new WeakSet<Worker>();
  let stopping = false;
  let failed = false;

  const stop = () => {
    stopping = true;
    // SIGTERM whatever the primary got: a terminal's Ctrl-C has already sent the workers SIGINT, and a
    // second SIGINT would kill them mid-drain.
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, stop);

  return new Promise((resolve, reject) => {
    cluster.on('listening', (worker, address) => {
      serving.add(worker);
      if (Object.values(cluster.workers ?? {}).every((w) => w && serving.has(w))) {
        resolve(serverUrl(config.host, address.port));
      }
    });
    cluster.on('exit', (worker, code, signal) => {
      if (stopping) {
        if (code !== 0) failed = true;
        if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(failed ? 1 : 0);
        return;
      }
      if (!serving.has(worker)) {
        // It never got as far as listening (a port in use, a database it cannot reach): forking it
        // again would fail the same way, so the whole service stops.
        stop();
        failed = true;
        reject(
          new Error(
            `worker ${worker.process.pid} exited (${signal ?? code}) before listening; see its output above`,
          ),
        );
        return;
      }
      process.stderr.write(
        `petstore: worker ${worker.process.pid} exited (${signal ?? code}); starting another\n`,
      );
      cluster.fork();
    });
    for (let i = 0; i < count; i++) cluster.fork();
  });
}
