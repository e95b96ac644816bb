/**
 * The delivery-lag scenario (`npm run bench -- delivery-lag`, i.e. `--scenarios delivery-lag`): how timely webhooks are under
 * writes. One endpoint, in a receiver in this process that answers 204 at once and notes, per event, the
 * time from its `occurredAt` to its arrival. For each layout of processes:
 *
 * 1. creates closed-loop (wrk) for --seconds: the node's create rate T with that endpoint, and how many
 *    deliveries arrived meanwhile per create (under saturation);
 * 2. the backlog left is delivered (its time is reported);
 * 3. creates paced at T/2 (or `--paced-rate`; open loop, from this process) for 2 × --seconds: the lag's p50, p99 and max,
 *    and whether every change was delivered.
 *
 * Layouts: `all` (one `serve --role all` on one core), `split` (`--role api` and `--role deliver`,
 * one core each) and `one-core` (`--role api` and `--role deliver` sharing one core). wrk, the pacer and the receiver run on the last core (with `split`, beside the
 * delivery process: a machine of two cores has no third); their CPU is reported beside the service's.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { Agent as HttpAgent, request } from 'node:http';
import { runLoad } from './load.js';
import {
  CLI,
  cpuMicros,
  definedOnly,
  freePort,
  pinned,
  ROOT,
  runToEnd,
  stop,
  TSX,
  waitUntilUp,
} from './processes.js';

export type Layout = 'all' | 'split' | 'one-core';

export interface DeliveryLagResult {
  backend: 'sqlite' | 'postgres';
  layout: Layout;
  /** Creates per second closed-loop: the rate T. */
  saturatedCreatesPerSecond: number;
  /** Deliveries per second that arrived during the closed loop. */
  saturatedDeliveriesPerSecond: number;
  /** The service's CPU during the closed loop, in cores: below 1 per process, it was not the limit. */
  saturatedServiceCores: number;
  /** Seconds the backlog the closed loop left took to arrive; Infinity when it did not within the bound. */
  backlogSeconds: number;
  pacedRate: number;
  /** The service's CPU while the paced creates were sent, in cores. */
  pacedServiceCores: number;
  pacedCreates: number;
  pacedDelivered: number;
  pacedDeliveriesPerSecond: number;
  lagP50Ms: number;
  lagP99Ms: number;
  lagMaxMs: number;
  /** A create's time from sent to answered while paced at T/2: what deliveries cost the API's requests. */
  createP99Ms: number;
  /** CPU time of the service's processes and of the generator side (wrk, pacer, receiver), per second. */
  serviceCpuPerSecond: number;
  generatorCpuPerSecond: number;
}

/** How long the backlog or the paced phase's last deliveries may take before the run gives up waiting. */
const DRAIN_BOUND_MS = 120_000;

/** The receiver (bench/webhook-receiver.ts), in its own process, pinned beside the generator. */
export class Receiver {
  #child: ChildProcess | undefined;
  #url = '';
  /** How many deliveries had arrived when last asked. */
  received = 0;

  async start(pin: boolean, cpu: string): Promise<string> {
    const port = await freePort();
    const [command, argv] = pinned(pin ? cpu : undefined, [
      process.execPath,
      ...TSX,
      'bench/webhook-receiver.ts',
      String(port),
    ]);
    this.#child = spawn(command, argv, { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
    this.#url = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 100; i++) {
      if (
        await this.poll().then(
          () => true,
          () => false,
        )
      )
        return `${this.#url}/hook`;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error('the webhook receiver did not start');
  }

  /** Asks how many arrived (one GET). */
  async poll(): Promise<number> {
    const { received } = (await (await fetch(`${this.#url}/received`)).json()) as { received: number };
    this.received = received;
    return received;
  }

  /** Per pet created, the ms from its event's occurredAt to its arrival. */
  async lags(): Promise<Map<number, number>> {
    return new Map((await (await fetch(`${this.#url}/lags`)).json()) as [number, number][]);
  }

  cpuMicros(): number {
    return this.#child ? cpuMicros(this.#child.pid as number) : 0;
  }

  async close(): Promise<void> {
    if (this.#child) await stop(this.#child);
  }
}

/** Seconds until `check` holds, or Infinity once `boundMs` have passed. */
async function until(check: () => boolean | Promise<boolean>, boundMs: number): Promise<number> {
  const started = performance.now();
  while (!(await check())) {
    if (performance.now() - started > boundMs) return Number.POSITIVE_INFINITY;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return (performance.now() - started) / 1000;
}

const percentile = (sorted: number[], p: number) =>
  sorted.length === 0
    ? Number.NaN
    : (sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number);

/**
 * Open-loop creates at `rate` per second for `seconds`: each sent when due, whatever the answers
 * before it. Resolves to the ids of the pets created (answered 201) and each create's time from sent
 * to answered, sorted, in milliseconds.
 */
async function paced(
  url: string,
  key: string,
  rate: number,
  seconds: number,
): Promise<{ created: number[]; latenciesMs: number[] }> {
  const agent = new HttpAgent({ keepAlive: true, maxSockets: 64 });
  const target = new URL('/v1/pets', url);
  let sent = 0;
  const created: number[] = [];
  const latenciesMs: number[] = [];
  let answered = 0;
  const started = performance.now();
  const total = Math.round(rate * seconds);
  await new Promise<void>((resolve) => {
    const send = () => {
      sent += 1;
      const body = JSON.stringify({ name: `lag ${sent}`, categoryId: sent % 100, status: 'available' });
      const sentAt = performance.now();
      const req = request(
        target,
        {
          method: 'POST',
          agent,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            latenciesMs.push(performance.now() - sentAt);
            if (res.statusCode === 201)
              created.push((JSON.parse(Buffer.concat(chunks).toString()) as { id: number }).id);
            answered += 1;
            if (answered === total) resolve();
          });
        },
      );
      req.on('error', () => {
        answered += 1;
        if (answered === total) resolve();
      });
      req.end(body);
    };
    const tick = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * rate));
      while (sent < due) send();
      if (sent === total) clearInterval(tick);
    }, 2);
  });
  agent.destroy();
  return { created, latenciesMs: latenciesMs.sort((a, b) => a - b) };
}

interface Service {
  url: string;
  children: ChildProcess[];
}

async function startLayout(
  layout: Layout,
  env: NodeJS.ProcessEnv,
  key: string,
  cli: string,
  pin: boolean,
): Promise<Service> {
  const roles = {
    all: [['all', '0']],
    split: [
      ['api', '0'],
      ['deliver', '1'],
    ],
    // Two processes on the one core: each its own event loop, the CPU shared.
    'one-core': [
      ['api', '0'],
      ['deliver', '0'],
    ],
  }[layout];
  const children: ChildProcess[] = [];
  let url = '';
  for (const [role, cpu] of roles as [Role, string][]) {
    const started = await startRole(cli, role, env, key, pin ? cpu : undefined);
    children.push(started.child);
    if (role !== 'deliver') url = started.url;
  }
  return { url, children };
}

export type Role = 'all' | 'api' | 'deliver';

/**
 * One `serve --role <role>` of the build `cli` on a free port, pinned to `cpu` if given; a role that
 * serves the API is waited for until it answers (a delivery process serves none of it).
 */
export async function startRole(
  cli: string,
  role: Role,
  env: NodeJS.ProcessEnv,
  key: string,
  cpu?: string,
  nodeArgs: readonly string[] = [],
): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  // `--role all` is what `serve` alone does; a build from before --role is measured with `serve` alone.
  const roleArgs = role === 'all' ? [] : ['--role', role];
  const [command, argv] = pinned(cpu, [process.execPath, ...nodeArgs, cli, 'serve', ...roleArgs]);
  const child = spawn(command, argv, {
    cwd: ROOT,
    env: definedOnly({ ...env, PORT: String(port) }),
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  if (role !== 'deliver') await waitUntilUp(url, child, key);
  return { child, url };
}

/** One layout on one database: the three phases. */
export async function measureDeliveryLag(options: {
  backend: 'sqlite' | 'postgres';
  layout: Layout;
  databaseUrl: string;
  env: NodeJS.ProcessEnv;
  key: string;
  seconds: number;
  connections: number;
  pin: boolean;
  generatorCpu: string;
  /** The CLI to start (another build's dist/cli/main.js, to measure it the same way). */
  cli?: string;
  /** Creates a second in the paced phase; T/2 when not given. */
  pacedRate?: number;
  log: (message: string) => void;
}): Promise<DeliveryLagResult> {
  const { backend, layout, env, key, seconds, connections, pin, generatorCpu, log } = options;
  const cli = options.cli ?? CLI;
  runToEnd(process.execPath, [cli, 'migrate'], env);
  const receiver = new Receiver();
  const hook = await receiver.start(pin, generatorCpu);
  const service = await startLayout(layout, env, key, cli, pin);
  const serviceCpu = () => service.children.reduce((sum, child) => sum + cpuMicros(child.pid as number), 0);
  try {
    const res = await fetch(`${service.url}/v1/webhook-endpoints`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: hook }),
    });
    if (res.status !== 201) throw new Error(`registering the endpoint: ${res.status} ${await res.text()}`);

    log(`delivery-lag ${backend} ${layout}: creates closed-loop for ${seconds} s`);
    const cpuBefore = serviceCpu();
    const ownBefore = process.cpuUsage();
    const wallBefore = performance.now();
    const closed = await runLoad(
      { url: service.url, key, connections, seconds, mix: [{ kind: 'create' }] },
      pin ? generatorCpu : undefined,
    );
    const saturatedDeliveries = await receiver.poll();
    const saturatedCores = (serviceCpu() - cpuBefore) / closed.wallMicros;
    const createdClosed = closed.requests - closed.non2xx;
    const backlogSeconds = await until(async () => (await receiver.poll()) >= createdClosed, DRAIN_BOUND_MS);
    log(
      `delivery-lag ${backend} ${layout}: backlog of ${createdClosed - saturatedDeliveries} delivered in ${backlogSeconds.toFixed(1)} s`,
    );

    const rate = options.pacedRate ?? Math.max(1, Math.round(closed.requestsPerSecond / 2));
    const pacedSeconds = seconds * 2;
    log(`delivery-lag ${backend} ${layout}: creates paced at ${rate}/s for ${pacedSeconds} s`);
    const pacedStarted = performance.now();
    const pacedCpuBefore = serviceCpu();
    const { created, latenciesMs } = await paced(service.url, key, rate, pacedSeconds);
    const pacedCores = (serviceCpu() - pacedCpuBefore) / 1e6 / ((performance.now() - pacedStarted) / 1000);
    let lagsById = new Map<number, number>();
    let count = 0;
    await until(async () => {
      lagsById = await receiver.lags();
      count = created.filter((id) => lagsById.has(id)).length;
      return count === created.length;
    }, DRAIN_BOUND_MS);
    const pacedWall = (performance.now() - pacedStarted) / 1000;
    const wall = (performance.now() - wallBefore) / 1000;
    const own = process.cpuUsage(ownBefore);
    const lags = created
      .map((id) => lagsById.get(id))
      .filter((lag): lag is number => lag !== undefined)
      .sort((a, b) => a - b);
    return {
      backend,
      layout,
      saturatedCreatesPerSecond: closed.requestsPerSecond,
      saturatedDeliveriesPerSecond: saturatedDeliveries / (closed.wallMicros / 1e6),
      saturatedServiceCores: saturatedCores,
      backlogSeconds,
      pacedRate: rate,
      pacedServiceCores: pacedCores,
      pacedCreates: created.length,
      pacedDelivered: count,
      pacedDeliveriesPerSecond: count / pacedWall,
      lagP50Ms: percentile(lags, 50),
      lagP99Ms: percentile(lags, 99),
      lagMaxMs: lags.at(-1) ?? Number.NaN,
      createP99Ms: percentile(latenciesMs, 99),
      serviceCpuPerSecond: (serviceCpu() - cpuBefore) / 1e6 / wall,
      generatorCpuPerSecond:
        (closed.generatorCpuMicros + own.user + own.system + receiver.cpuMicros()) / 1e6 / wall,
    };
  } finally {
    await Promise.all(service.children.map((child) => stop(child)));
    await receiver.close();
  }
}

const LAYOUT_NAMES: Record<Layout, string> = {
  all: '`--role all`, one core',
  split: '`--role api` + `--role deliver`, one core each',
  'one-core': '`--role api` + `--role deliver`, sharing one core',
};

/** The scenario's section of the report: one line per backend and layout. */
export function renderDeliveryLag(results: readonly DeliveryLagResult[]): string {
  const s = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : 'not within the bound');
  const lines = [
    '| backend | layout | T (creates/s, closed loop) | deliveries per create under it | service CPU under it (cores) | backlog left, delivered in | paced at T/2 (or --paced-rate): delivered, at | service CPU meanwhile (cores) | lag p50 | lag p99 | lag max | create p99 meanwhile | service CPU / generator CPU (cores) |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    lines.push(
      `| ${r.backend} | ${LAYOUT_NAMES[r.layout]} | ${r.saturatedCreatesPerSecond.toFixed(0)} | ${(r.saturatedDeliveriesPerSecond / r.saturatedCreatesPerSecond).toFixed(2)} | ${r.saturatedServiceCores.toFixed(2)} | ${Number.isFinite(r.backlogSeconds) ? `${r.backlogSeconds.toFixed(1)} s` : 'not within 120 s'} | ${r.pacedDelivered} of ${r.pacedCreates}, ${r.pacedRate}/s | ${r.pacedServiceCores.toFixed(2)} | ${s(r.lagP50Ms)} | ${s(r.lagP99Ms)} | ${s(r.lagMaxMs)} | ${Number.isFinite(r.createP99Ms) ? `${r.createP99Ms.toFixed(1)} ms` : '–'} | ${r.serviceCpuPerSecond.toFixed(2)} / ${r.generatorCpuPerSecond.toFixed(2)} |`,
    );
  }
  return lines.join('\n');
}
