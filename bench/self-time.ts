/**
 * A V8 CPU profile (`node --cpu-prof`'s .cpuprofile) read as self time per function, counted only in
 * the windows a tool measured (so the start, the seeding and the warm-up are left out), for side-by-side's
 * `--cpu-prof`. V8 stamps samples on the monotonic clock in microseconds, the clock of
 * `process.hrtime`, so a window taken with `monotonicMicros()` in the tool selects them.
 *
 * The profiler samples by wall time: a sample is the stack at a tick, `(idle)` when the thread waits.
 * Pinned alone to its CPU (the tool's load and PostgreSQL elsewhere) the rest is its CPU; sharing the
 * CPU, a tick that lands while the thread is descheduled is charged to whatever ran last (a syscall's
 * caller, say), so read a profile taken that way with care.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ROOT } from './processes.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface Window {
  fromMicros: number;
  toMicros: number;
}

export const monotonicMicros = (): number => Number(process.hrtime.bigint() / 1000n);

/** Where a function lives, shortly: `node:internal/…`, `<package>/<file>` in node_modules, or the repository's path. */
function place(url: string): string {
  if (url === '') return '';
  const path = url.startsWith('file://') ? new URL(url).pathname : url;
  const modules = path.lastIndexOf('/node_modules/');
  if (modules >= 0) return path.slice(modules + '/node_modules/'.length);
  return path.startsWith('/') ? relative(ROOT, path) : path;
}

/** The package or area a place belongs to: `pg`, `fastify`, `node:internal`, `dist/http`, `(gc)`… */
export function area(key: string): string {
  const [name = '', at = ''] = key.split(' @ ');
  if (at === '') return name.startsWith('(') ? name : '(native)';
  if (at.startsWith('node:')) return 'node:internal';
  if (at.startsWith('dist/')) return at.split('/').slice(0, 2).join('/').replace(/:\d+$/, '');
  const parts = at.split('/');
  return (at.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? '')).replace(/:\d+$/, '');
}

/**
 * Self time in each window, per function (`name @ place:line`), in microseconds, summed over the
 * profiles of a directory (one per process; a target's is the only one in its directory).
 */
export function selfTime(directory: string, windows: readonly Window[]): Map<string, number> {
  const totals = new Map<string, number>();
  for (const file of readdirSync(directory).filter((name) => name.endsWith('.cpuprofile'))) {
    const profile = JSON.parse(readFileSync(join(directory, file), 'utf8')) as CpuProfile;
    const keys = new Map<number, string>();
    for (const { id, callFrame } of profile.nodes) {
      const at = place(callFrame.url);
      const name = callFrame.functionName || '(anonymous)';
      keys.set(id, at ? `${name} @ ${at}:${callFrame.lineNumber + 1}` : name);
    }
    // A sample's time is the gap to the next one (the last has none).
    let at = profile.startTime;
    const stamps = profile.timeDeltas.map((delta) => {
      at += delta;
      return at;
    });
    for (let i = 0; i + 1 < profile.samples.length; i++) {
      const stamp = stamps[i] as number;
      if (!windows.some((w) => stamp >= w.fromMicros && stamp < w.toMicros)) continue;
      const key = keys.get(profile.samples[i] as number) as string;
      totals.set(key, (totals.get(key) ?? 0) + ((stamps[i + 1] as number) - stamp));
    }
  }
  return totals;
}

/** Sums a function's self times by `group` (area, say). */
export function grouped(times: Map<string, number>, group: (key: string) => string): Map<string, number> {
  const sums = new Map<string, number>();
  for (const [key, micros] of times) sums.set(group(key), (sums.get(group(key)) ?? 0) + micros);
  return sums;
}

/**
 * A Markdown table, µs a request: the rows that weigh most in any column, each column's total of what
 * was not idle first. `columns`: a name, the self times and the requests in the same windows.
 */
export function selfTimeTable(
  columns: readonly { name: string; times: Map<string, number>; requests: number }[],
  rows: number,
): string {
  const perRequest = columns.map(({ times, requests }) => {
    const each = new Map<string, number>();
    for (const [key, micros] of times) each.set(key, micros / requests);
    return each;
  });
  const keys = [...new Set(perRequest.flatMap((each) => [...each.keys()]))].filter((key) => key !== '(idle)');
  const weight = (key: string) => Math.max(...perRequest.map((each) => each.get(key) ?? 0));
  const top = keys.sort((a, b) => weight(b) - weight(a)).slice(0, rows);
  const cell = (micros: number | undefined) => (micros === undefined ? '–' : micros.toFixed(1));
  const busy = perRequest.map((each) =>
    [...each].reduce((sum, [key, micros]) => (key === '(idle)' ? sum : sum + micros), 0),
  );
  return [
    `| µs a request | ${columns.map(({ name }) => name).join(' | ')} |`,
    `| --- | ${columns.map(() => '---:').join(' | ')} |`,
    `| **all but idle** | ${busy.map((micros) => `**${cell(micros)}**`).join(' | ')} |`,
    ...top.map(
      (key) =>
        `| \`${key.replaceAll('|', '\\|')}\` | ${perRequest.map((each) => cell(each.get(key))).join(' | ')} |`,
    ),
  ].join('\n');
}
