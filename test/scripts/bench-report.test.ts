import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Row, type Run, renderHeadline, renderReport } from '../../bench/report.js';

const row = (target: string, backend: Row['backend'], cpu: number, size = 10_000, scenario = 'get'): Row => ({
  scenario,
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

test("when a quiet run and a run with a neighbour are rendered as the headline, then each service row gives both multiples of its own run's floor beside the goal", () => {
  const rows = (floor: number, get: number, create: number, hooked: number, delivered: number) => [
    row('fastify floor (fixed bytes)', 'floor', floor),
    row('sqlite', 'sqlite', get),
    row('fastify floor (fixed bytes)', 'floor', floor + 10, 10_000, 'create'),
    row('sqlite', 'sqlite', create, 10_000, 'create'),
    row('fastify floor (fixed bytes)', 'floor', floor + 10, 10_000, 'create-with-webhook'),
    { ...row('sqlite', 'sqlite', hooked, 10_000, 'create-with-webhook'), deliveriesPerRequest: delivered },
  ];
  const headline = renderHeadline(
    run(rows(20, 50, 60, 66, 1)),
    run(rows(25, 80, 70, 91, 0.125), 'a busy loop on CPU 1'),
  );
  assert.deepEqual(cells(headline, 'get'), [
    'get',
    'sqlite',
    '10k',
    '50 / 20',
    '**2.50**',
    '80 / 25',
    '**3.20**',
    '≤ 2.0',
  ]);
  assert.deepEqual(cells(headline, 'create'), [
    'create',
    'sqlite',
    '10k',
    '60 / 30',
    '**2.00**',
    '70 / 35',
    '**2.00**',
    '≤ 2.0',
  ]);
  assert.deepEqual(cells(headline, 'create-with-webhook').slice(3, 8), [
    '66 / 30',
    '**2.20**',
    '91 / 35',
    '**2.60**',
    '–',
  ]);
  // Create with one endpoint against create without, in each condition.
  // … and how many deliveries were made in the window per create (fewer than one: some were put off).
  assert.deepEqual(cells(headline, 'sqlite'), ['sqlite', '10k', '1.10', '1.30', '≤ 1.15', '1.00', '0.13']);
  assert.match(headline, /With a neighbour: .*a busy loop on CPU 1/);
});

test('when a run had create-with-webhook and create-at-endpoint-limit, then their table gives each the endpoints, the deliveries made in the window per create, the throughput kept and the CPU', () => {
  const report = renderReport(
    run([
      { ...row('sqlite', 'sqlite', 60, 10_000, 'create'), requestsPerSecond: 1000 },
      {
        ...row('sqlite', 'sqlite', 66, 10_000, 'create-with-webhook'),
        requestsPerSecond: 900,
        deliveriesPerRequest: 0.25,
      },
      { ...row('postgres', 'postgres', 100, 10_000, 'create'), requestsPerSecond: 500 },
      { ...row('postgres', 'postgres', 150, 10_000, 'create-with-webhook'), requestsPerSecond: 250 },
      {
        ...row('postgres', 'postgres', 180, 10_000, 'create-at-endpoint-limit'),
        requestsPerSecond: 400,
        deliveriesPerRequest: 3,
      },
    ]),
  );
  const table = report.slice(report.indexOf('### create with webhook endpoints against create without'));
  assert.deepEqual(cells(table, 'sqlite'), ['sqlite', '10k', '1', '1000', '900', '0.90', '60', '66', '0.25']);
  // A run from before the count: a dash, not a zero.
  assert.deepEqual(cells(table, 'postgres'), [
    'postgres',
    '10k',
    '1',
    '500',
    '250',
    '0.50',
    '100',
    '150',
    '–',
  ]);
  const atLimit = table.split('\n').filter((line) => line.startsWith('| postgres |'))[1] ?? '';
  assert.deepEqual(cells(atLimit, 'postgres'), [
    'postgres',
    '10k',
    '100',
    '500',
    '400',
    '0.80',
    '100',
    '180',
    '3.00',
  ]);
});

test('when a run was measured in rounds, then its report and headline say how: rounds of --seconds, the targets taking turns', () => {
  const inRounds = (neighbour?: string): Run => ({ ...run([], neighbour), rounds: 3 });
  assert.match(
    renderReport(inRounds()),
    /32 connections, 3 rounds of 5 s per target, the targets taking turns, 1 worker/,
  );
  assert.match(renderReport(run([])), /32 connections, 5 s per run, 1 worker/);
  assert.match(
    renderHeadline(inRounds(), inRounds('a busy loop')),
    /32 connections, 3 rounds of 5 s per target, the targets taking turns\./,
  );
  assert.match(renderHeadline(run([]), run([], 'a busy loop')), /32 connections, 5 s per target\./);
});
