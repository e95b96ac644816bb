import type { LoadResult } from './load.js';

/** What one measured window of one target gives (bench/run.ts's load). */
export type Window = LoadResult & { peakRss: number; cpuMicros: number; delivered?: number };

/** The middle value (the mean of the two middle ones for an even count). */
export const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
};

/**
 * One target's windows of one scenario (`--rounds N`: the targets take turns N times), as one: counts and
 * CPU times summed, so CPU per request is the total over the total (each window weighs what it served);
 * throughput the requests over the time measured; the median of the p50s and the worst p99; the highest
 * resident memory. On a shared machine the noise comes in spells of seconds to minutes: with the floor
 * and the services measured in turn, a spell falls on all of them rather than on one.
 */
export function combineWindows(windows: readonly Window[]): Window {
  if (windows.length === 0) throw new Error('no window to combine');
  const sum = (pick: (window: Window) => number) => windows.reduce((total, w) => total + pick(w), 0);
  const requests = sum((w) => w.requests);
  const seconds = sum((w) => (w.requestsPerSecond > 0 ? w.requests / w.requestsPerSecond : 0));
  const delivered = windows.every((w) => w.delivered !== undefined)
    ? sum((w) => w.delivered ?? 0)
    : undefined;
  return {
    requests,
    requestsPerSecond: seconds > 0 ? requests / seconds : 0,
    p50: median(windows.map((w) => w.p50)),
    p99: Math.max(...windows.map((w) => w.p99)),
    non2xx: sum((w) => w.non2xx),
    generatorCpuMicros: sum((w) => w.generatorCpuMicros),
    wallMicros: sum((w) => w.wallMicros),
    peakRss: Math.max(...windows.map((w) => w.peakRss)),
    cpuMicros: sum((w) => w.cpuMicros),
    ...(delivered === undefined ? {} : { delivered }),
  };
}
