/**
 * Soak: mixed traffic against a running service for a fixed duration, then a report.
 *
 *   npm run soak -- [--duration 60s|10m|600] [--concurrency 8] [--url http://127.0.0.1:3000 --key pst_…]
 *                   [--out docs/soak.md]
 *
 * Without --url it starts `petstore serve` itself on a temporary SQLite database (dist/cli/main.js when
 * built, else the sources through tsx), on 127.0.0.1 and a free port, and stops it at the end. Only
 * 127.0.0.1 (or localhost, ::1) is ever contacted.
 *
 * Traffic: 80% listPets (no parameters, a random limit, a status filter, or following the previous
 * page's `next` link), 15% createPet, 5% getPet (a known id, or now and then one that does not exist).
 * The load is closed-loop: `--concurrency` workers, each sending its next request when the previous one
 * is answered, over keep-alive connections (Node's fetch, i.e. undici). That keeps the number of
 * requests in flight fixed, needs no dependency, and lets every request depend on earlier answers (the
 * `next` cursor, ids just created), which a fixed-request tool such as autocannon cannot do easily.
 * The latency figures are per answered request; a closed loop does not count the time a request would
 * have waited to be sent (no coordinated-omission correction), so read p99 as "service time under this
 * concurrency", not as what an open-loop arrival rate would see.
 *
 * It stops by itself after --duration (requests in flight at that instant are awaited, each bounded by
 * a 30 s timeout), then prints the report: requests by status, errors, p50/p90/p99/max per minute, and
 * the server's resident memory and heap (from its /metrics) at start, every minute and at the end.
 * A 429 is counted apart, as throttled: neither a success nor an error of the service, but a sign that
 * the run measured a rate limiter (a server given with --url keeps the limits it was started with).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, freemem, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT, startServe } from '../support/service-process.js';

const STATUSES = ['available', 'pending', 'sold'] as const;
const REQUEST_TIMEOUT_MS = 30_000;

interface Options {
  durationMs: number;
  concurrency: number;
  url: string | undefined;
  key: string | undefined;
  out: string | undefined;
  logLevel: string;
}

function usage(message: string): never {
  process.stderr.write(
    `${message}\nusage: npm run soak -- [--duration 60s|10m|<seconds>] [--concurrency <n>] ` +
      '[--url http://127.0.0.1:<port> --key <api key>] [--out <report.md>] [--log-level info]\n',
  );
  process.exit(2);
}

/** "600", "600s", "10m", "1h" → milliseconds. */
function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!match) usage(`--duration: not a duration: ${text}`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(match[2] ?? 's') as 'ms' | 's' | 'm' | 'h'];
  const ms = Number(match[1]) * unit;
  if (!(ms >= 1000 && ms <= 24 * 3_600_000)) usage('--duration: between 1s and 24h');
  return ms;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string', default: '60s' },
      concurrency: { type: 'string', default: '8' },
      url: { type: 'string' },
      key: { type: 'string' },
      out: { type: 'string' },
      'log-level': { type: 'string', default: 'info' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) usage('Sends mixed traffic to the animal store service and reports on it.');
  const concurrency = Number(values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1024)
    usage('--concurrency: an integer from 1 to 1024');
  if (values.url !== undefined) {
    let url: URL;
    try {
      url = new URL(values.url);
    } catch {
      usage(`--url: not a URL: ${values.url}`);
    }
    // Never load anything but this machine.
    if (!['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname))
      usage(`--url: only 127.0.0.1 (or localhost, ::1) is allowed, not ${url.hostname}`);
    if (values.key === undefined) usage('--key is required with --url');
  }
  return {
    durationMs: parseDuration(values.duration as string),
    concurrency,
    url: values.url?.replace(/\/$/, ''),
    key: values.key,
    out: values.out,
    logLevel: values['log-level'] as string,
  };
}

/** A server this script started: where it listens, and how to stop it. */
interface OwnServer {
  url: string;
  key: string;
  how: string;
  stop(): Promise<void>;
}

async function startOwnServer(logLevel: string): Promise<OwnServer> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-soak-'));
  const key = `soak-${randomBytes(24).toString('hex')}`;
  // The build when there is one (what a deployment runs), else the source.
  const entry = existsSync(join(REPO_ROOT, 'dist/cli/main.js')) ? 'built' : 'source';
  try {
    const server = await startServe(
      {
        HOST: '127.0.0.1',
        DATABASE_URL: `sqlite:${join(dir, 'soak.db')}`,
        PETSTORE_API_KEYS: key,
        // The soak measures the service, not its throttle: one key sends everything, far beyond a client's
        // budget. (A server given with --url keeps whatever limits it was started with.)
        RATE_LIMIT_PER_SECOND: '0',
        // "Server listening at" is an info entry: below info the address could not be learnt.
        LOG_LEVEL: ['trace', 'debug', 'info'].includes(logLevel) ? logLevel : 'info',
      },
      // Its request log is drained, never kept: hours of it would fill this process's memory.
      { entry, stdout: 'drain' },
    );
    const stop = async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    };
    return {
      url: server.url,
      key,
      how: `${entry === 'built' ? 'dist/cli/main.js' : 'tsx src/cli/main.ts'} serve`,
      stop,
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

interface MemorySample {
  atMs: number;
  rss: number;
  heapUsed: number;
  heapTotal: number;
}

/** The server's memory, from its Prometheus metrics. */
async function sampleMemory(url: string, atMs: number): Promise<MemorySample | undefined> {
  try {
    const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) });
    const text = await res.text();
    const metric = (name: string): number => {
      const match = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)`, 'm').exec(text);
      return match ? Number(match[1]) : Number.NaN;
    };
    return {
      atMs,
      rss: metric('petstore_process_resident_memory_bytes'),
      heapUsed: metric('petstore_nodejs_heap_size_used_bytes'),
      heapTotal: metric('petstore_nodejs_heap_size_total_bytes'),
    };
  } catch {
    return undefined;
  }
}

type Kind = 'list' | 'list-next' | 'list-status' | 'create' | 'get' | 'get-missing';

interface Minute {
  latencies: number[];
  byStatus: Map<string, number>;
}

class Recorder {
  readonly minutes: Minute[] = [];
  readonly byKind = new Map<Kind, Map<string, number>>();
  readonly errorSamples: string[] = [];
  readonly started = performance.now();
  created = 0;

  record(kind: Kind, status: string, startedAt: number, endedAt: number): void {
    const index = Math.floor((startedAt - this.started) / 60_000);
    let minute = this.minutes[index];
    if (!minute) {
      minute = { latencies: [], byStatus: new Map() };
      this.minutes[index] = minute;
    }
    minute.latencies.push(endedAt - startedAt);
    minute.byStatus.set(status, (minute.byStatus.get(status) ?? 0) + 1);
    let kinds = this.byKind.get(kind);
    if (!kinds) {
      kinds = new Map();
      this.byKind.set(kind, kinds);
    }
    kinds.set(status, (kinds.get(status) ?? 0) + 1);
  }

  error(text: string): void {
    if (this.errorSamples.length < 10) this.errorSamples.push(text);
  }
}

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T;

/** One worker: requests one after the other until the deadline. */
async function worker(
  n: number,
  url: string,
  key: string,
  deadline: number,
  recorder: Recorder,
  knownIds: bigint[],
): Promise<void> {
  const auth = { authorization: `Bearer ${key}` };
  let next: string | undefined;
  let sequence = 0;
  while (performance.now() < deadline) {
    const roll = Math.random();
    let kind: Kind;
    let path: string;
    let init: RequestInit = { headers: auth };
    if (roll < 0.8) {
      const sub = Math.random();
      if (next !== undefined && sub < 0.4) {
        kind = 'list-next';
        path = next;
      } else if (sub < 0.7) {
        kind = 'list-status';
        path = `/v1/pets?status=${pick(STATUSES)}&limit=${1 + Math.floor(Math.random() * 100)}`;
      } else {
        kind = 'list';
        path = Math.random() < 0.5 ? '/v1/pets' : `/v1/pets?limit=${1 + Math.floor(Math.random() * 100)}`;
      }
    } else if (roll < 0.95) {
      kind = 'create';
      path = '/v1/pets';
      init = {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({
          name: `soak ${n}-${sequence++}`,
          categoryId: Math.floor(Math.random() * 1_000_000),
          status: pick(STATUSES),
        }),
      };
    } else if (knownIds.length > 0 && Math.random() < 0.9) {
      kind = 'get';
      path = `/v1/pets/${pick(knownIds)}`;
    } else {
      kind = 'get-missing';
      path = `/v1/pets/${9_000_000_000_000_000n + BigInt(Math.floor(Math.random() * 1e9))}`;
    }

    const startedAt = performance.now();
    let status: string;
    try {
      const res = await fetch(`${url}${path}`, { ...init, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
      const text = await res.text();
      status = String(res.status);
      if (kind.startsWith('list') && res.status === 200) {
        const link = res.headers.get('link');
        const match = link ? /^<([^<>]+)>; rel="next"$/.exec(link) : null;
        next = match
          ? new URL(match[1] as string, url).pathname + new URL(match[1] as string, url).search
          : undefined;
      }
      if (kind === 'create' && res.status === 201) {
        recorder.created++;
        const id = /"id":(\d+)/.exec(text)?.[1];
        if (id && knownIds.length < 100_000) knownIds.push(BigInt(id));
      }
      const expected =
        (kind === 'create' && res.status === 201) ||
        (kind === 'get-missing' && res.status === 404) ||
        (kind !== 'create' && kind !== 'get-missing' && res.status === 200);
      if (!expected && res.status !== 429)
        recorder.error(`${init.method ?? 'GET'} ${path} → ${res.status} ${text.slice(0, 200)}`);
    } catch (error) {
      status = 'network error';
      recorder.error(`${init.method ?? 'GET'} ${path} → ${(error as Error).message}`);
    }
    recorder.record(kind, status, startedAt, performance.now());
  }
}

/** A soak that met the rate limit measured the limiter: say so, with the fix. */
function throttledWarning(throttled: number, requests: number): string {
  return (
    `**Warning: ${throttled} of ${requests} requests (${((throttled / requests) * 100).toFixed(1)}%) were ` +
    'throttled (429)**, so these figures measure the rate limiter, not the service. Start the service with ' +
    "RATE_LIMIT_PER_SECOND=0 (or a limit above the soak's rate) and run it again."
  );
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

const ms = (value: number) => (Number.isNaN(value) ? '–' : value.toFixed(1));
const mib = (bytes: number) => (Number.isNaN(bytes) ? '–' : (bytes / 1024 / 1024).toFixed(1));

function report(
  options: Options,
  recorder: Recorder,
  elapsedMs: number,
  memory: MemorySample[],
  server: string,
  integrity: string | undefined,
): string {
  const total = new Map<string, number>();
  let requests = 0;
  for (const minute of recorder.minutes) {
    for (const [status, count] of minute?.byStatus ?? []) {
      total.set(status, (total.get(status) ?? 0) + count);
      requests += count;
    }
  }
  const errors = [...total].filter(([status]) => status === 'network error' || status.startsWith('5'));
  const throttled = total.get('429') ?? 0;
  const unexpected = recorder.errorSamples.length;
  const lines: string[] = [];
  lines.push(
    `Ran ${(elapsedMs / 1000).toFixed(1)} s at concurrency ${options.concurrency} against ${server}.`,
    '',
    `**${requests} requests** (${(requests / (elapsedMs / 1000)).toFixed(0)}/s), ` +
      `**${errors.reduce((sum, [, count]) => sum + count, 0)} errors** (5xx or network), ` +
      `**${throttled} throttled** (429), ${recorder.created} pets created.`,
    '',
  );
  if (throttled > 0) lines.push(throttledWarning(throttled, requests), '');
  lines.push(
    '### Requests by status',
    '',
    '| Status | Count |',
    '| --- | ---: |',
    ...[...total].sort().map(([status, count]) => `| ${status} | ${count} |`),
    '',
    '### Requests by kind and status',
    '',
    '| Kind | Statuses |',
    '| --- | --- |',
    ...[...recorder.byKind]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(
        ([kind, statuses]) =>
          `| ${kind} | ${[...statuses]
            .sort()
            .map(([s, c]) => `${s}: ${c}`)
            .join(', ')} |`,
      ),
    '',
    '### Latency per minute (ms, from sending the request to reading the whole body)',
    '',
    '| Minute | Requests | p50 | p90 | p99 | max | non-2xx |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  );
  const all: number[] = [];
  recorder.minutes.forEach((minute, index) => {
    if (!minute) return;
    const sorted = Float64Array.from(minute.latencies).sort();
    const values = Array.from(sorted);
    for (const value of values) all.push(value);
    const non2xx = [...minute.byStatus]
      .filter(([status]) => !status.startsWith('2'))
      .reduce((sum, [, count]) => sum + count, 0);
    lines.push(
      `| ${index + 1} | ${values.length} | ${ms(percentile(values, 50))} | ${ms(percentile(values, 90))} | ` +
        `${ms(percentile(values, 99))} | ${ms(values[values.length - 1] ?? Number.NaN)} | ${non2xx} |`,
    );
  });
  const sortedAll = Array.from(Float64Array.from(all).sort());
  lines.push(
    `| all | ${sortedAll.length} | ${ms(percentile(sortedAll, 50))} | ${ms(percentile(sortedAll, 90))} | ` +
      `${ms(percentile(sortedAll, 99))} | ${ms(sortedAll[sortedAll.length - 1] ?? Number.NaN)} | ` +
      `${[...total].filter(([s]) => !s.startsWith('2')).reduce((sum, [, c]) => sum + c, 0)} |`,
    '',
    '(non-2xx includes the deliberate 404s of `get-missing`, and any 429.)',
    '',
    '### Server memory (from /metrics)',
    '',
    '| At | RSS MiB | heap used MiB | heap total MiB |',
    '| --- | ---: | ---: | ---: |',
    ...memory.map(
      (sample, i) =>
        `| ${i === 0 ? 'start' : i === memory.length - 1 ? 'end' : `${(sample.atMs / 60_000).toFixed(1)} min`} | ` +
        `${mib(sample.rss)} | ${mib(sample.heapUsed)} | ${mib(sample.heapTotal)} |`,
    ),
    '',
  );
  if (integrity) lines.push('### Integrity', '', integrity, '');
  lines.push(
    '### Unexpected answers (first 10)',
    '',
    unexpected === 0 ? 'None.' : recorder.errorSamples.map((e) => `- \`${e}\``).join('\n'),
    '',
  );
  return lines.join('\n');
}

/** Walks every page and counts the pets (only for a server this script started on an empty database). */
async function countPets(url: string, key: string): Promise<number> {
  let path: string | undefined = '/v1/pets?limit=100';
  let count = 0;
  const ids = new Set<string>();
  while (path !== undefined) {
    const res: Response = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${key}` } });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`listing failed: ${res.status} ${text}`);
    for (const match of text.matchAll(/"id":(\d+)/g)) ids.add(match[1] as string);
    count += (text.match(/"id":/g) ?? []).length;
    const link = res.headers.get('link');
    const match = link ? /^<([^<>]+)>; rel="next"$/.exec(link) : null;
    path = match
      ? new URL(match[1] as string, url).pathname + new URL(match[1] as string, url).search
      : undefined;
  }
  if (ids.size !== count) throw new Error(`the walk saw ${count} pets but ${ids.size} distinct ids`);
  return count;
}

async function main(): Promise<void> {
  const options = parseOptions();
  const own = options.url === undefined ? await startOwnServer(options.logLevel) : undefined;
  const url = own?.url ?? (options.url as string);
  const key = own?.key ?? (options.key as string);
  const server = own ? `its own \`${own.how}\` on a fresh SQLite database (${url})` : url;
  let stopping = false;
  const onSignal = () => {
    if (stopping) process.exit(130);
    stopping = true;
    process.stderr.write('interrupted: stopping the server\n');
    void (own?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    const probe = await fetch(`${url}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${key}` } });
    await probe.arrayBuffer();
    if (probe.status !== 200) throw new Error(`GET /v1/pets with the key answered ${probe.status}`);

    const recorder = new Recorder();
    const memory: MemorySample[] = [];
    const first = await sampleMemory(url, 0);
    if (first) memory.push(first);
    const deadline = recorder.started + options.durationMs;
    const knownIds: bigint[] = [];
    process.stderr.write(
      `soak: ${options.durationMs / 1000} s, concurrency ${options.concurrency}, against ${url}\n`,
    );
    const sampler = setInterval(() => {
      const at = performance.now() - recorder.started;
      void sampleMemory(url, at).then((sample) => {
        if (sample) memory.push(sample);
        const done = recorder.minutes.reduce((sum, m) => sum + (m?.latencies.length ?? 0), 0);
        process.stderr.write(
          `  ${(at / 60_000).toFixed(1)} min: ${done} requests, RSS ${mib(sample?.rss ?? Number.NaN)} MiB\n`,
        );
      });
    }, 60_000);
    await Promise.all(
      Array.from({ length: options.concurrency }, (_, n) =>
        worker(n, url, key, deadline, recorder, knownIds),
      ),
    );
    clearInterval(sampler);
    const elapsedMs = performance.now() - recorder.started;
    const last = await sampleMemory(url, elapsedMs);
    if (last) memory.push(last);

    let integrity: string | undefined;
    if (own) {
      const stored = await countPets(url, key);
      integrity =
        `Every page walked after the run: ${stored} pets stored, ${recorder.created} answered 201 ` +
        `(${stored === recorder.created ? 'equal' : 'NOT EQUAL'}), no id twice.`;
    }
    const text = report(options, recorder, elapsedMs, memory, server, integrity);
    process.stdout.write(`${text}\n`);
    if (options.out) {
      const header = [
        '# Soak report',
        '',
        `- Command: \`npm run soak -- ${process.argv.slice(2).join(' ')}\``,
        `- Date: ${new Date().toISOString()}`,
        `- Machine: ${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'}), ` +
          `${(totalmem() / 1024 ** 3).toFixed(1)} GiB memory (${(freemem() / 1024 ** 3).toFixed(1)} GiB free at the end), ` +
          `Node ${process.version}, ${process.platform}`,
        '',
      ].join('\n');
      writeFileSync(options.out, `${header}\n${text}`);
      process.stderr.write(`report written to ${options.out}\n`);
    }
  } finally {
    await own?.stop();
  }
}

await main();
