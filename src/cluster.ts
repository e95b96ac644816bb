import cluster, { type Worker } from 'node:cluster';
import { createServer } from 'node:net';
import type { Logger } from 'pino';
import type { Role } from './app.js';
import { ClusterMetrics } from './cluster-metrics.js';
import type { Config } from './config/config.js';
import { METRICS_REQUEST, METRICS_RESPONSE } from './http/observability/metrics.js';
import { listenForMetrics } from './http/observability/metrics-listener.js';
import { StreamSlotBroker } from './http/routes/stream-slots.js';
import { createLogger } from './logging.js';
import { announceFirstKey, serverUrl } from './server.js';
import { databaseLocation, openStorage } from './storage/open-storage.js';
import { NODE_VERSION, VERSION } from './version.js';

/** The primary to its workers on SIGTERM: close the listening socket, and say when it is closed. */
export const STOP_ACCEPTING = 'petstore:stop-accepting';
export const STOPPED_ACCEPTING = 'petstore:stopped-accepting';
/** How long the primary waits for a worker to say it stopped accepting before it drains anyway. */
const STOP_ACCEPTING_TIMEOUT_MS = 5_000;

/** A worker replaced after dying this soon after it started listening waits longer each time. */
const HEALTHY_AFTER_MS = 10_000;
/** The first wait before forking again after a worker died young; doubled for each death in a row. */
const FIRST_BACKOFF_MS = 250;
/** The longest wait between forks: a database that comes back is served again within this. */
const MAX_BACKOFF_MS = 10_000;

/**
 * The primary of `petstore serve --workers N`. N worker processes listen on one port, each accepting
 * connections itself from the socket they share (SCHED_NONE). Node's default on Linux, round-robin, has
 * the primary accept every connection and pass it on; a connection in passage when its worker is killed
 * stays open in the primary for good, unanswered (seen: CLOSE-WAIT until the client gave up). Accepting
 * in the workers spreads connections less evenly, but a busy worker accepts less, and no connection is
 * ever stranded: a dying worker's connections are closed by the kernel. The primary serves nothing
 * itself: it migrates the database once before any worker opens it (so workers never race to migrate a
 * SQLite file), creates the first API key once, replaces every worker that dies, for as long as it is
 * asked to serve, and on SIGTERM or SIGINT tells every worker to drain and exits when they all have.
 * It answers for every worker's metrics (cluster-metrics.ts), on METRICS_PORT itself when that is set.
 * Its log lines are JSON like the workers', on the same stdout.
 */
export async function runCluster(config: Config, workers: number, role: Role = 'all'): Promise<void> {
  if (config.databaseUrl === 'sqlite::memory:') {
    throw new Error(
      '--workers needs a database the workers share; sqlite::memory: is private to each process',
    );
  }
  // A port in use would make every worker fail to listen, forever: say so once, before forking.
  if (config.port !== 0) await assertPortFree(config.host, config.port);
  // Migrates once, before any worker opens the database; a schema this build cannot serve stops the
  // start here, with the one line main writes and nothing logged or listening.
  // The primary process serves no reads: no replicas to probe.
  const storage = await openStorage({ ...config, databaseReplicaUrls: [] });
  let log: Logger;
  let url: string;
  try {
    log = await createLogger(config);
    log.info(
      { version: VERSION, node: NODE_VERSION, workers, role },
      `petstore ${VERSION} on Node.js ${NODE_VERSION}`,
    );
    // In the JSON log like every line of serve (each worker logs it too): never plain text among them.
    log.info(`database: ${databaseLocation(config.databaseUrl)}`);
    if (config.rateLimit.perSecond > 0 && !config.redisUrl) {
      log.warn(
        `without REDIS_URL each of the ${workers} workers keeps its own rate-limit buckets, so an API key may use up to ${workers} times RATE_LIMIT_PER_SECOND and RATE_LIMIT_BURST; set REDIS_URL to share one budget`,
      );
    }
    if (config.databaseReplicaUrls.length > 0 && !config.redisUrl) {
      log.warn(
        `without REDIS_URL each of the ${workers} workers knows only its own writes' positions, so a key whose next read reaches another worker may be served by a replica that has not replayed its write yet (within DATABASE_REPLICA_MAX_LAG_MS); set REDIS_URL to share them`,
      );
    }
    cluster.schedulingPolicy = cluster.SCHED_NONE;
    const metrics = new ClusterMetrics();
    // Before any worker is forked: a port in use stops the start here.
    if (config.metrics) {
      const { host, port } = config.metrics;
      const listener = await listenForMetrics(
        host,
        port,
        async () => ({
          contentType: metrics.contentType,
          text: await metrics.text(),
        }),
        config,
      );
      log.info(`metrics listening at ${serverUrl(host, listener.port)}/metrics`);
    }
    url = await new Supervisor(config, workers, log, metrics).start();
    // The API's processes hand out the first key; delivery processes have no API to use it on.
    if (role !== 'deliver') await announceFirstKey(storage.apiKeys, config, url);
  } finally {
    await storage.close();
  }
  log.info({ workers, url }, `${workers} workers listening on ${url}`);
}

function assertPortFree(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) =>
      reject(new Error(`cannot listen on ${serverUrl(host, port)}: ${error.code ?? error.message}`)),
    );
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/** How long to wait before forking again after `failures` deaths in a row (0: after a healthy spell). */
export function restartDelay(failures: number): number {
  return failures === 0 ? 0 : Math.min(FIRST_BACKOFF_MS * 2 ** (failures - 1), MAX_BACKOFF_MS);
}

/** Deaths in a row after a worker that listened for `livedMs` died: a healthy spell starts over. */
export function failuresAfter(previous: number, livedMs: number): number {
  return livedMs >= HEALTHY_AFTER_MS ? 0 : previous + 1;
}

interface Slot {
  worker: Worker | undefined;
  /** Deaths in a row of workers that did not stay up for HEALTHY_AFTER_MS. */
  failures: number;
  listeningSince: number | undefined;
  restart: NodeJS.Timeout | undefined;
}

/** Keeps `count` workers alive: forks them, replaces each one that dies, with back-off, until told to stop. */
class Supervisor {
  readonly #config: Config;
  readonly #slots: Slot[];
  readonly #bySlot = new Map<Worker, Slot>();
  readonly #log: Logger;
  readonly #metrics: ClusterMetrics;
  /** The live streams each key holds on this node, all workers together (EVENT_STREAM_MAX_PER_KEY). */
  readonly #streamSlots: StreamSlotBroker;
  #stopping = false;
  #failed = false;

  constructor(config: Config, count: number, log: Logger, metrics: ClusterMetrics) {
    this.#streamSlots = new StreamSlotBroker(config.eventStreams.maxPerKey);
    this.#config = config;
    this.#log = log;
    this.#metrics = metrics;
    this.#slots = Array.from({ length: count }, () => ({
      worker: undefined,
      failures: 0,
      listeningSince: undefined,
      restart: undefined,
    }));
  }

  /** Forks every worker; resolves with the service's address once all of them have listened. */
  start(): Promise<string> {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => this.#stop());
    return new Promise((resolve) => {
      cluster.on('listening', (worker, address) => {
        const slot = this.#bySlot.get(worker);
        if (slot) slot.listeningSince = Date.now();
        if (this.#slots.every((s) => s.listeningSince !== undefined)) {
          resolve(serverUrl(this.#config.host, address.port));
        }
      });
      cluster.on('exit', (worker, code, signal) => this.#exited(worker, code, signal));
      for (const slot of this.#slots) this.#fork(slot);
    });
  }

  /** Answers a worker's request for every worker's metrics, aggregated (see askPrimaryForMetrics). */
  #answerMetrics(worker: Worker, message: { type?: unknown; id?: unknown }): void {
    if (message?.type !== METRICS_REQUEST) return;
    this.#metrics.text().then(
      (text) => worker.send({ type: METRICS_RESPONSE, id: message.id, text }),
      (error: Error) => worker.send({ type: METRICS_RESPONSE, id: message.id, error: error.message }),
    );
  }

  #fork(slot: Slot): void {
    slot.restart = undefined;
    slot.listeningSince = undefined;
    let worker: Worker;
    try {
      worker = cluster.fork();
    } catch (error) {
      // The one failure that replacing cannot mend: stop, so a supervisor above restarts us.
      this.#log.fatal({ err: error }, `cannot start a worker: ${(error as Error).message}`);
      this.#failed = true;
      this.#stop();
      return;
    }
    slot.worker = worker;
    this.#bySlot.set(worker, slot);
    this.#metrics.added(worker, this.#slots.indexOf(slot));
    worker.on('message', (message) => {
      if (!this.#streamSlots.handle(worker, message)) this.#answerMetrics(worker, message);
    });
  }

  #exited(worker: Worker, code: number, signal: string | null): void {
    const slot = this.#bySlot.get(worker);
    this.#bySlot.delete(worker);
    this.#metrics.retired(worker);
    this.#streamSlots.retired(worker);
    const cause = signal ? `killed by ${signal}` : `exit code ${code}`;
    if (this.#stopping) {
      if (code !== 0 && signal !== 'SIGTERM') this.#failed = true;
      if (this.#bySlot.size === 0) process.exit(this.#failed ? 1 : 0);
      return;
    }
    if (!slot) return;
    slot.worker = undefined;
    const lived = slot.listeningSince === undefined ? 0 : Date.now() - slot.listeningSince;
    slot.failures = failuresAfter(slot.failures, lived);
    const delay = restartDelay(slot.failures);
    this.#log.error(
      { worker: worker.process.pid, cause, restartInMs: delay },
      `worker ${worker.process.pid} ${slot.listeningSince === undefined ? 'died before listening' : 'died'} (${cause}); starting another in ${delay} ms`,
    );
    slot.restart = setTimeout(() => this.#fork(slot), delay);
  }

  /**
   * Every worker stops accepting first; only once all have (the shared listening socket is then closed,
   * so new connections are refused, not queued) are they told to drain. A worker draining while another
   * still accepted would send its clients, with `Connection: close`, to a socket about to close.
   */
  #stop(): void {
    if (this.#stopping) return;
    this.#stopping = true;
    for (const slot of this.#slots) clearTimeout(slot.restart);
    if (this.#bySlot.size === 0) process.exit(this.#failed ? 1 : 0);
    const workers = [...this.#bySlot.keys()];
    const stopped = workers.map(
      (worker) =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, STOP_ACCEPTING_TIMEOUT_MS);
          const done = () => {
            clearTimeout(timer);
            resolve();
          };
          worker.on('message', (message) => {
            if (message === STOPPED_ACCEPTING) done();
          });
          worker.once('exit', done);
          if (worker.isConnected()) worker.send(STOP_ACCEPTING);
          else done();
        }),
    );
    // SIGTERM whatever the primary got: a terminal's Ctrl-C has already sent the workers SIGINT, and a
    // second SIGINT would kill them mid-drain.
    void Promise.all(stopped).then(() => {
      for (const worker of workers) if (!worker.isDead()) worker.process.kill('SIGTERM');
    });
  }
}
