import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Row, type Run, renderReport } from '../../bench/report.js';

const row = (target: string, backend: Row['backend'], cpu: number, size = 10_000): Row => ({
  scenario: 'get',
  target,
  backend,
  size,
  requestsPerSecond: 1000,
  p50: 1,
  p99: 2,
  non2xx: 0,
  peakRssMiB: 100,
  cpuMicrosPerRequest: cpu,
  generatorCpuMicrosPerRequest: 10,
  generatorBusy: 0.2,
});

const run = (rows: Row[], neighbour?: string): Run => ({
  date: '2026-11-27T00:00:00.000Z',
  command: 'npm run bench',
  machine: { nproc: 2, memoryGiB: 24, cpu: 'test', node: 'v20' },
  workers: 1,
  connections: 32,
  seconds: 5,
  ...(neighbour ? { neighbour } : {}),
  rows,
  bareQueries: {},
});

/** The cells of the table row whose first cell is `target`. */
function cells(report: string, target: string): string[] {
  const line = report.split('\n').find((l) => l.startsWith(`| ${target} |`));
  assert.ok(line, `no row for ${target} in\n${report}`);
  return line
    .split('|')
    .slice(1, -1)
    .map((cell) => cell.trim());
}

test("when a run is rendered, then each row gives its server CPU per request as a multiple of the same size's Fastify floor", () => {
  const report = renderReport(
    run([
      row('reference (node:http)', 'reference', 16),
      row('fastify floor (fixed bytes)', 'floor', 20),
      row('sqlite', 'sqlite', 50),
      row('fastify floor (fixed bytes)', 'floor', 25, 1_000_000),
      row('postgres 1M', 'postgres', 100, 1_000_000),
    ]),
  );
  const header = cells(report, 'target');
  const column = header.indexOf('CPU × floor');
  assert.equal(header[column - 1], 'CPU µs/req');
  assert.equal(cells(report, 'sqlite')[column], '2.50');
  assert.equal(cells(report, 'reference (node:http)')[column], '0.80');
  assert.equal(cells(report, 'postgres 1M')[column], '4.00'); // against the floor of its own size
  assert.match(report, /\*\*CPU × floor\*\* is the target's server CPU per request over the Fastify floor's/);
});

test('when a run had no floor row, then the multiple is a dash, not a number', () => {
  const report = renderReport(
    run([row('reference (node:http)', 'reference', 16), row('sqlite', 'sqlite', 50)]),
  );
  const column = cells(report, 'target').indexOf('CPU × floor');
  assert.equal(cells(report, 'sqlite')[column], '–');
});

test('when a run had a neighbour, then its header says what it was; a run without one says nothing of it', () => {
  const busy = renderReport(run([row('sqlite', 'sqlite', 50)], 'a busy loop pinned to CPU 1, the whole run'));
  assert.match(busy, /Neighbour: a busy loop pinned to CPU 1, the whole run\./);
  assert.doesNotMatch(renderReport(run([row('sqlite', 'sqlite', 50)])), /Neighbour/);
});
