/**
 * The load generator: wrk (C, one thread, its own process), driven by a Lua script written at run time
 * from a LoadSpec. Runs against 127.0.0.1 only, for a bounded time, and returns what wrk counted plus
 * the CPU time wrk itself used, so the report can say whether the generator, not the target, was the
 * limit (a saturated generator makes the reference's figure too low and every ratio to it too high).
 *
 * wrk is Debian's package; `ensureWrk` installs it with apt-get when it is missing, and says so.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pinned } from './processes.js';
import type { LoadSpec, TrafficPart } from './scenarios.js';

export interface LoadResult {
  requests: number;
  /** requests / seconds measured. */
  requestsPerSecond: number;
  /** Latency percentiles, in milliseconds. */
  p50: number;
  p99: number;
  /** Responses other than 2xx/3xx, plus connection errors and timeouts. */
  non2xx: number;
  /** CPU time (user + system) wrk used, in microseconds. */
  generatorCpuMicros: number;
  /** The wall-clock time wrk ran, in microseconds. */
  wallMicros: number;
}

/** Installs wrk from the distribution's packages when it is not on the PATH; says what it did. */
export function ensureWrk(log: (message: string) => void): void {
  if (spawnSync('wrk', ['--version'], { encoding: 'utf8' }).error === undefined) return;
  log('wrk (the load generator) is not installed: installing it with apt-get (Debian package "wrk")');
  const sudo = process.getuid?.() === 0 ? [] : ['sudo'];
  const install = spawnSync(
    sudo.length > 0 ? 'sudo' : 'apt-get',
    [...(sudo.length > 0 ? ['apt-get'] : []), 'install', '-y', 'wrk'],
    {
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    },
  );
  if (install.status !== 0 || spawnSync('wrk', ['--version']).error !== undefined)
    throw new Error('wrk could not be installed: install it (apt-get install wrk) and run again');
  log('wrk installed');
}

const lua = (text: string) => `"${text.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;

/**
 * A wrk script for a traffic mix. GETs are formatted once, in `init`, and picked at random per
 * request; creates get a distinct body each, as real clients' would; orders take the next available
 * animal (`orderable`, listed before the run).
 */
function script(spec: LoadSpec, orderable: number[]): string {
  const auth = `Bearer ${spec.key}`;
  const parts = spec.mix.map((part: TrafficPart, index) => {
    const upTo = part.upTo ?? 100;
    if (part.kind === 'get')
      return `  { up_to = ${upTo}, kind = "get", paths = { ${part.paths.map(lua).join(', ')} } }, -- ${index}`;
    return `  { up_to = ${upTo}, kind = "${part.kind}" }, -- ${index}`;
  });
  return `-- written by bench/load.ts
local parts = {
${parts.join('\n')}
}
local orderable = { ${orderable.join(', ')} }
local statuses = { "available", "pending", "sold" }
local get_headers = { ["authorization"] = ${lua(auth)} }
local post_headers = { ["authorization"] = ${lua(auth)}, ["content-type"] = "application/json" }
local run = ${lua(Math.random().toString(36).slice(2, 10))}
local sequence = 0
local ordered = 0
local warned = false

function init(args)
  for _, part in ipairs(parts) do
    if part.kind == "get" then
      part.requests = {}
      for i, path in ipairs(part.paths) do part.requests[i] = wrk.format("GET", path, get_headers) end
    end
  end
end

function request()
  local roll = math.random() * 100
  local part = parts[#parts]
  for _, candidate in ipairs(parts) do
    if candidate.up_to > roll then part = candidate; break end
  end
  if part.kind == "get" then return part.requests[math.random(#part.requests)] end
  if part.kind == "create" then
    sequence = sequence + 1
    local body = '{"name":"bench ' .. run .. ' ' .. sequence .. '","categoryId":' .. (sequence % 1000) ..
      ',"status":"' .. statuses[1 + sequence % 3] .. '"}'
    return wrk.format("POST", "/v1/pets", post_headers, body)
  end
  if ordered == #orderable and not warned then
    io.stderr:write("load: each of the " .. #orderable .. " available animals listed was ordered; the rest of the run orders them again (a service answers 409)\\n")
    warned = true
  end
  local pet = orderable[(ordered % math.max(1, #orderable)) + 1] or 1
  ordered = ordered + 1
  return wrk.format("POST", "/v1/store/orders", post_headers, '{"petId":' .. pet .. '}')
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests":%d,"durationMicros":%d,"non2xx":%d,"p50":%f,"p99":%f}\\n',
    summary.requests, summary.duration, e.status + e.connect + e.read + e.write + e.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
`;
}

/**
 * The ids of available animals, for `place` traffic: listed page by page before the load starts (at
 * most enough for the run), then each ordered once, in id order. A run that outlasts them wraps round,
 * and its later orders are answered 409: the script says so on stderr.
 */
async function availablePets(spec: LoadSpec, max: number): Promise<number[]> {
  const ids = new Set<number>();
  let path: string | undefined = '/v1/pets?status=available&limit=100';
  for (let pages = 0; path !== undefined && ids.size < max && pages < max / 100; pages++) {
    const res: Response = await fetch(`${spec.url}${path}`, {
      headers: { authorization: `Bearer ${spec.key}` },
    });
    for (const pet of (await res.json()) as { id: number }[]) ids.add(pet.id);
    path = /^<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
  }
  return [...ids];
}

/** The CPU the shell's children used, from the `times` builtin's second line ("0m1.23s 0m0.45s"). */
function childCpuMicros(times: string): number {
  const line = times.trim().split('\n').at(-1) ?? '';
  const seconds = [...line.matchAll(/(\d+)m([\d.]+)s/g)].map(([, m, s]) => Number(m) * 60 + Number(s));
  return seconds.reduce((sum, value) => sum + value, 0) * 1e6;
}

/**
 * Runs wrk for `spec.seconds` with one thread and `spec.connections` connections. `cpus`, when given,
 * pins wrk to those CPUs (processes.ts's pinned), away from the target's.
 */
export async function runLoad(spec: LoadSpec, cpus?: string): Promise<LoadResult> {
  if (new URL(spec.url).hostname !== '127.0.0.1') throw new Error('load goes to 127.0.0.1 only');
  const orderable = spec.mix.some((part) => part.kind === 'place') ? await availablePets(spec, 60_000) : [];
  const dir = mkdtempSync(join(tmpdir(), 'petstore-wrk-'));
  try {
    const file = join(dir, 'load.lua');
    writeFileSync(file, script(spec, orderable));
    const [program, programArgs] = pinned(cpus, [
      'wrk',
      '-t1',
      `-c${spec.connections}`,
      `-d${spec.seconds}s`,
      '--timeout',
      '10s',
      '-s',
      file,
      spec.url,
    ]);
    const wrk = [program, ...programArgs];
    // The shell's `times` reports the CPU its children used, exactly (getrusage), once wrk has exited.
    const command = `${wrk.map((word) => `'${word}'`).join(' ')} > '${join(dir, 'out')}' && times > '${join(dir, 'times')}'`;
    const started = process.hrtime.bigint();
    await new Promise<void>((resolve, reject) => {
      const child = spawn('sh', ['-c', command], { stdio: ['ignore', 'ignore', 'inherit'] });
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`wrk exited ${code}`))));
    });
    const wallMicros = Number(process.hrtime.bigint() - started) / 1000;
    const out = readFileSync(join(dir, 'out'), 'utf8');
    const line = out.split('\n').find((text) => text.startsWith('{"requests"'));
    if (!line) throw new Error(`wrk printed no summary:\n${out}`);
    const summary = JSON.parse(line) as {
      requests: number;
      durationMicros: number;
      non2xx: number;
      p50: number;
      p99: number;
    };
    return {
      requests: summary.requests,
      requestsPerSecond: summary.requests / (summary.durationMicros / 1e6),
      p50: summary.p50,
      p99: summary.p99,
      non2xx: summary.non2xx,
      generatorCpuMicros: childCpuMicros(readFileSync(join(dir, 'times'), 'utf8')),
      wallMicros: Math.max(wallMicros, summary.durationMicros),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
