/**
 * What bench/profile.ts reads from other programs, parsed: V8's --trace-gc lines, strace -c's table,
 * Fastify's printRoutes({ includeHooks: true }) tree, and /proc task snapshots. Pure functions, so that
 * the odd line each program may print is tested (test/scripts/profile.test.ts).
 */
import { statCpuMicros } from './processes.js';

/** One thread of a process: its name (comm) and the CPU time it has used, in microseconds. */
export interface ThreadSample {
  tid: number;
  name: string;
  cpuMicros: number;
}

/**
 * The CPU each group of threads used between two snapshots of /proc/<pid>/task, in microseconds: the
 * main thread (tid == pid) as `main`, the others by name. A thread born during the window counts from 0;
 * one that ended is lost (its time goes to no group), as /proc keeps nothing of it.
 */
export function cpuByGroup(
  pid: number,
  before: ThreadSample[],
  after: ThreadSample[],
): Record<string, number> {
  const start = new Map(before.map((thread) => [thread.tid, thread.cpuMicros]));
  const groups: Record<string, number> = {};
  for (const thread of after) {
    const group = thread.tid === pid ? 'main' : thread.name;
    groups[group] = (groups[group] ?? 0) + thread.cpuMicros - (start.get(thread.tid) ?? 0);
  }
  return groups;
}

/** A thread's sample from its stat line and comm; undefined when the stat line is not one. */
export function threadSample(tid: number, stat: string, comm: string): ThreadSample | undefined {
  const cpuMicros = statCpuMicros(stat);
  return cpuMicros === undefined ? undefined : { tid, name: comm.trim() || '?', cpuMicros };
}

export type GcKind = 'scavenge' | 'mark-compact' | 'minor-mark-compact';

/** One garbage collection, as --trace-gc reports it; heap sizes in bytes, pause in milliseconds. */
export interface GcEvent {
  kind: GcKind;
  /** Milliseconds since the isolate started. */
  at: number;
  heapBefore: number;
  heapAfter: number;
  pauseMs: number;
}

/**
 * V8's --trace-gc line, e.g. (V8 11)
 * `[123:0x55d0c0a8e000]     1234 ms: Scavenge 4.1 (5.8) -> 3.6 (6.8) MB, 0.71 / 0.00 ms  (average …`
 * or (V8 12) `… ms: Scavenge (interleaved) 3.8 (4.0) -> 3.4 (5.0) MB, pooled: 0 MB, 0.98 / 0.00 ms …`;
 * sizes are the used heap (the committed one in parentheses) in MB of 2^20 bytes, then the main
 * thread's pause. Found anywhere in a line, as a log line written at the same moment may precede it.
 */
const GC_LINE =
  /\[\d+:0x[0-9a-f]+\]\s+(\d+) ms: ((?:Minor )?Mark-Compact|Scavenge)\b[^0-9]*?([\d.]+) \([\d.]+\) -> ([\d.]+) \([\d.]+\) MB, (?:pooled: [\d.]+ MB, )?([\d.]+) /;
const MB = 2 ** 20;

/**
 * The GCs in some output, in order; the JSON log lines (and anything else) around them are skipped.
 * `unparsed` counts the lines that look like V8's (`[pid:0x…] … ms: `) but are not a GC this knows.
 */
export function parseGcTrace(text: string): { events: GcEvent[]; unparsed: number } {
  const events: GcEvent[] = [];
  let unparsed = 0;
  for (const line of text.split('\n')) {
    if (!line.includes(' ms: ')) continue;
    const match = GC_LINE.exec(line);
    if (!match) {
      if (/\[\d+:0x[0-9a-f]+\]\s+\d+ ms: /.test(line)) unparsed++;
      continue;
    }
    const [, at, name, before, after, pause] = match as unknown as string[];
    const kind: GcKind = name?.startsWith('Minor')
      ? 'minor-mark-compact'
      : name?.startsWith('Mark-Compact')
        ? 'mark-compact'
        : 'scavenge';
    events.push({
      kind,
      at: Number(at),
      heapBefore: Number(before) * MB,
      heapAfter: Number(after) * MB,
      pauseMs: Number(pause),
    });
  }
  return { events, unparsed };
}

export interface GcSummary {
  scavenges: number;
  markCompacts: number;
  minorMarkCompacts: number;
  /** Main-thread pause, summed, in milliseconds. */
  pauseMs: number;
  /** Bytes allocated, estimated (see summariseGcs). */
  allocatedBytes: number;
}

/**
 * The GCs of a window (`inWindow`), given the one before it (`previous`, when there was one). What was
 * allocated is estimated as the sum over the window's GCs of the used heap before each minus the used
 * heap after the GC before it: between two GCs the heap only grows by allocation. It misses what was
 * allocated after the window's last GC and counts what was allocated before its first one, since the
 * GC before it (the two ends roughly cancel over many GCs); it is as exact as the trace's 0.1 MB.
 */
export function summariseGcs(previous: GcEvent | undefined, inWindow: GcEvent[]): GcSummary {
  let last = previous;
  let allocatedBytes = 0;
  for (const event of inWindow) {
    if (last) allocatedBytes += Math.max(0, event.heapBefore - last.heapAfter);
    last = event;
  }
  const count = (kind: GcKind) => inWindow.filter((event) => event.kind === kind).length;
  return {
    scavenges: count('scavenge'),
    markCompacts: count('mark-compact'),
    minorMarkCompacts: count('minor-mark-compact'),
    pauseMs: inWindow.reduce((sum, event) => sum + event.pauseMs, 0),
    allocatedBytes,
  };
}

/**
 * `strace -c`'s table: calls (and errors) by syscall, without the total. Its rows are
 * `% time  seconds  usecs/call  calls  [errors]  syscall`, the errors column blank when there were none.
 */
export function parseStraceSummary(text: string): Record<string, { calls: number; errors: number }> {
  const calls: Record<string, { calls: number; errors: number }> = {};
  for (const line of text.split('\n')) {
    const match = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:(\d+)\s+)?([a-z_][a-z0-9_]*)\s*$/.exec(line);
    if (!match || match[3] === 'total') continue;
    calls[match[3] as string] = { calls: Number(match[1]), errors: Number(match[2] ?? 0) };
  }
  return calls;
}

/** The hooks of one route, by lifecycle phase, in the order they run. */
export type RouteHooks = Record<string, string[]>;

/**
 * Fastify's `printRoutes({ includeHooks: true, commonPrefix: false })`: a tree of path segments, each
 * with its methods and, under it, one `• (phase) ["name()", …]` line per phase that has hooks. Keys
 * are `METHOD /full/path`. A route's path is its segment after those of the rows above it that are
 * less indented (each level is four characters of `│   `, `├── ` or `└── `).
 */
export function parseRouteHooks(tree: string): Record<string, RouteHooks> {
  const routes: Record<string, RouteHooks> = {};
  const ancestors: string[] = [];
  let current: RouteHooks[] = [];
  for (const line of tree.split('\n')) {
    const start = line.search(/[^│├└─\s]/u);
    if (start < 0) continue;
    const text = line.slice(start);
    const hook = /^• \((\w+)\) (\[.*\])$/.exec(text);
    if (hook) {
      let names: unknown;
      try {
        names = JSON.parse(hook[2] as string);
      } catch {
        continue;
      }
      if (!Array.isArray(names)) continue;
      for (const route of current) route[hook[1] as string] = names.map((name) => String(name));
      continue;
    }
    if (text.startsWith('•')) continue; // a hook line that is not one of the above: skipped
    const route = /^(\S+) \(([A-Z, ]+)\)$/.exec(text);
    const depth = Math.floor(start / 4);
    ancestors.length = depth;
    current = [];
    // A segment without a method of its own (only children) is still part of the paths below it.
    ancestors[depth] = route ? (route[1] as string) : text;
    if (!route) continue;
    const path = ancestors.join('');
    current = (route[2] as string).split(/,\s*/).map((method) => {
      const hooks: RouteHooks = {};
      routes[`${method} ${path}`] = hooks;
      return hooks;
    });
  }
  return routes;
}
