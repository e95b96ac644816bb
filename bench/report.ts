/** Renders a benchmark run as Markdown: one table per scenario, ratios to the reference of the same run. */

import { type Scenario, WEBHOOK_ENDPOINTS } from './scenarios.js';

export interface Row {
  scenario: string;
  target: string;
  /**
   * reference: bare node:http; floor: bare Fastify; both answer fixed bytes, whatever the data size.
   * express: the hand-written Express + better-sqlite3 version (bench/express-baseline.ts).
   */
  backend: 'reference' | 'floor' | 'sqlite' | 'postgres' | 'express';
  size: number;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  /** Responses other than 2xx, plus connection errors and timeouts. */
  non2xx: number;
  peakRssMiB: number;
  /** The server's CPU time (user + system) per answered request, in microseconds. */
  cpuMicrosPerRequest: number;
  /** The load generator's (wrk's) CPU time per request, in microseconds (absent in older runs). */
  generatorCpuMicrosPerRequest?: number;
  /** The generator's CPU time over the run's wall-clock time: 1 is one core, all of it. */
  generatorBusy?: number;
  /**
   * create-with-webhook: webhook requests the receiver got while the load ran, per request answered.
   * Below 1, deliveries were put off (they yield to requests) and their cost falls after the window.
   */
  deliveriesPerRequest?: number;
}

/**
 * A generator busier than this was (or was about to be) the limit: its target's figure, and any
 * ratio involving it, is not a measurement of the target.
 */
export const GENERATOR_SATURATED = 0.9;
const saturated = (row: Row | undefined) => (row?.generatorBusy ?? 0) >= GENERATOR_SATURATED;

export interface Run {
  date: string;
  command: string;
  machine: { nproc: number; memoryGiB: number; cpu: string; node: string };
  workers: number;
  connections: number;
  seconds: number;
  /** How many turns the targets of each scenario took, each measured `seconds` (absent: one). */
  rounds?: number;
  /** The load generator and how it ran (absent in runs made with autocannon). */
  generator?: string;
  /** The machine's 1-minute load average when the run started and when it ended. */
  loadAverage?: [number, number];
  /** What else kept the machine busy on purpose (--neighbour), or absent for a run left alone. */
  neighbour?: string;
  rows: Row[];
  /**
   * PostgreSQL: the same SQL through the same driver and pool, without HTTP, by size: {get, list, create}
   * in queries/s and {getCpuMicros, …} the CPU per query (create: absent in runs before issue 42).
   */
  bareQueries: Record<string, Record<string, number>>;
}

/** How long each target was measured in a scenario: one window (`single`), or --rounds turns taken in turn. */
const measured = (run: Run, single: string) =>
  (run.rounds ?? 1) > 1
    ? `${run.rounds} rounds of ${run.seconds} s per target, the targets taking turns`
    : `${run.seconds} s ${single}`;
const fixed = (value: number, digits: number) => value.toFixed(digits);
const sizeLabel = (size: number) => (size >= 1_000_000 ? `${size / 1_000_000}M` : `${size / 1000}k`);

export function renderReport(run: Run): string {
  const lines = [
    `Date: ${run.date}. Command: \`${run.command}\`.`,
    '',
    `Machine: ${run.machine.nproc} cores (${run.machine.cpu}), ${run.machine.memoryGiB} GiB memory, Node.js ${run.machine.node}; ` +
      `${run.connections} connections, ${measured(run, 'per run')}, ${run.workers} worker(s) per service.` +
      (run.generator ? ` Load generator: ${run.generator}.` : '') +
      (run.loadAverage
        ? ` Load average (1 min): ${fixed(run.loadAverage[0], 2)} at the start, ${fixed(run.loadAverage[1], 2)} at the end.`
        : '') +
      (run.neighbour ? ` Neighbour: ${run.neighbour}.` : ''),
    '',
    `A ratio is struck out as not valid where the load generator used ${GENERATOR_SATURATED * 100}% or more of a core ` +
      '(for that target or for the reference it is compared with): the generator, not the target, was then the limit.',
    '',
    "**CPU × floor** is the target's server CPU per request over the Fastify floor's in the same scenario " +
      "and run: what the target's own work costs beside the framework's, the figure a busy machine disturbs least.",
    '',
  ];
  const scenarios = [...new Set(run.rows.map((row) => row.scenario))];
  for (const scenario of scenarios) {
    lines.push(`### ${scenario}`, '');
    lines.push(
      '| target | pets | req/s | × reference | p50 ms | p99 ms | non-2xx | peak RSS MiB | CPU µs/req | CPU × floor | wrk CPU µs/req | wrk busy |',
    );
    lines.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const row of run.rows.filter((r) => r.scenario === scenario)) {
      const reference = run.rows.find(
        (r) => r.scenario === scenario && r.size === row.size && r.backend === 'reference',
      );
      const floor = run.rows.find(
        (r) => r.scenario === scenario && r.size === row.size && r.backend === 'floor',
      );
      const ratio = reference ? row.requestsPerSecond / reference.requestsPerSecond : Number.NaN;
      const valid = !saturated(row) && !saturated(reference);
      const generator =
        row.generatorCpuMicrosPerRequest === undefined
          ? '– | –'
          : `${fixed(row.generatorCpuMicrosPerRequest, 1)} | ${fixed((row.generatorBusy ?? 0) * 100, 0)}%${saturated(row) ? ' **saturated**' : ''}`;
      lines.push(
        `| ${row.target} | ${row.backend === 'reference' || row.backend === 'floor' ? '–' : sizeLabel(row.size)} | ${Math.round(row.requestsPerSecond)} | ${valid ? fixed(ratio, 2) : `~~${fixed(ratio, 2)}~~ not valid`} | ${fixed(row.p50, 2)} | ${fixed(row.p99, 2)} | ${row.non2xx} | ${fixed(row.peakRssMiB, 0)} | ${fixed(row.cpuMicrosPerRequest, 0)} | ${floor ? fixed(row.cpuMicrosPerRequest / floor.cpuMicrosPerRequest, 2) : '–'} | ${generator} |`,
      );
    }
    lines.push('');
  }

  // Webhook endpoints against none: what recording events and deliveries costs a create (goals: 1.15×
  // the CPU with one endpoint; with WEBHOOK_MAX_ENDPOINTS of them, at least half the throughput).
  const withHook = run.rows.filter(
    (r) => WEBHOOK_ENDPOINTS[r.scenario as Scenario] !== undefined && r.backend !== 'reference',
  );
  if (withHook.length > 0) {
    lines.push('### create with webhook endpoints against create without', '');
    lines.push(
      '| target | pets | endpoints | create req/s | with endpoints req/s | kept (throughput) | CPU µs/req | with endpoints CPU µs/req | deliveries per create, in the window |',
    );
    lines.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const row of withHook) {
      const plain = run.rows.find(
        (r) => r.scenario === 'create' && r.target === row.target && r.size === row.size,
      );
      if (!plain) continue;
      lines.push(
        `| ${row.target} | ${sizeLabel(row.size)} | ${WEBHOOK_ENDPOINTS[row.scenario as Scenario]} | ${Math.round(plain.requestsPerSecond)} | ${Math.round(row.requestsPerSecond)} | ${fixed(row.requestsPerSecond / plain.requestsPerSecond, 2)} | ${fixed(plain.cpuMicrosPerRequest, 0)} | ${fixed(row.cpuMicrosPerRequest, 0)} | ${delivered(row)} |`,
      );
    }
    lines.push('');
  }

  const sizes = [...new Set(run.rows.map((row) => row.size))].sort((a, b) => a - b);
  const [small, large] = [sizes[0], sizes[sizes.length - 1]];
  if (small !== undefined && large !== undefined && small !== large) {
    lines.push(`### ${sizeLabel(large)} pets against ${sizeLabel(small)}: throughput kept`, '');
    lines.push(
      `| scenario | target | × reference at ${sizeLabel(small)} | × reference at ${sizeLabel(large)} | kept (throughput) | kept (CPU per request) |`,
    );
    lines.push('| --- | --- | ---: | ---: | ---: | ---: |');
    for (const scenario of scenarios) {
      for (const target of new Set(
        run.rows.filter((r) => r.backend !== 'reference' && r.backend !== 'floor').map((r) => r.target),
      )) {
        const ratioAt = (size: number) => {
          const row = run.rows.find((r) => r.scenario === scenario && r.target === target && r.size === size);
          const ref = run.rows.find(
            (r) => r.scenario === scenario && r.backend === 'reference' && r.size === size,
          );
          return row && ref ? row.requestsPerSecond / ref.requestsPerSecond : Number.NaN;
        };
        const cpuAt = (size: number) =>
          run.rows.find((r) => r.scenario === scenario && r.target === target && r.size === size)
            ?.cpuMicrosPerRequest ?? Number.NaN;
        const [a, b] = [ratioAt(small), ratioAt(large)];
        lines.push(
          `| ${scenario} | ${target} | ${fixed(a, 2)} | ${fixed(b, 2)} | ${fixed(b / a, 2)} | ${fixed(cpuAt(small) / cpuAt(large), 2)} |`,
        );
      }
    }
    lines.push(
      '',
      'Kept (throughput) compares ratios to the reference measured beside each run; kept (CPU per request) compares ' +
        "the server's CPU time per request at both sizes, which a busy neighbour on the shared machine disturbs least.",
      '',
    );
  }

  if (Object.keys(run.bareQueries).length > 0) {
    lines.push('### PostgreSQL against its bare queries (same driver and pool, no HTTP)', '');
    lines.push(
      '| pets | scenario | service req/s | bare queries/s | service ÷ bare | service CPU µs/req | bare CPU µs/query (Node side) | CPU ÷ (floor + bare), goal ≤ 1.3 |',
    );
    lines.push('| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const [size, bare] of Object.entries(run.bareQueries)) {
      for (const scenario of ['get', 'list', 'create']) {
        const row = run.rows.find(
          (r) => r.scenario === scenario && r.backend === 'postgres' && r.size === Number(size),
        );
        const floor = run.rows.find(
          (r) => r.scenario === scenario && r.backend === 'floor' && r.size === Number(size),
        );
        const queries = bare[scenario] ?? Number.NaN;
        const bareCpu = bare[`${scenario}CpuMicros`];
        // The issue-42 goal: the service's CPU per request within 1.3× what the framework (the floor's
        // CPU per request, same scenario and run) and the driver (the bare statement's) cost at least.
        const overFloorAndBare =
          floor && bareCpu !== undefined
            ? fixed(row ? row.cpuMicrosPerRequest / (floor.cpuMicrosPerRequest + bareCpu) : Number.NaN, 2)
            : '–';
        if (row) {
          lines.push(
            `| ${sizeLabel(Number(size))} | ${scenario} | ${Math.round(row.requestsPerSecond)} | ${queries} | ${fixed(row.requestsPerSecond / queries, 2)} | ${fixed(row.cpuMicrosPerRequest, 0)} | ${bareCpu ?? '–'} | ${overFloorAndBare} |`,
          );
        }
      }
    }
    lines.push(
      '',
      "Bare create: the transaction the service's create runs for one pet (BEGIN, the pets INSERT, the event " +
        'order lock, the event row, COMMIT: five round trips), one create a transaction; under load the ' +
        'service batches concurrent creates into one transaction, so its create can cost less than this.',
      '',
    );
  }
  return `${lines.join('\n')}\n`;
}

/** Deliveries made in the window per create, or a dash for a run that did not count them. */
const delivered = (row: Row | undefined): string =>
  row?.deliveriesPerRequest === undefined ? '–' : fixed(row.deliveriesPerRequest, 2);

/** The goals for the service's CPU per request, as a multiple of the Fastify floor's in the same run. */
export const FLOOR_GOALS: Readonly<Record<string, number>> = { get: 2.0, list: 2.5, create: 2.0 };

/**
 * The figure of record: each service's CPU per request as a multiple of the Fastify floor's, from one
 * run on a quiet machine and one with a CPU-bound neighbour, side by side, beside the goal; and a
 * create with one webhook endpoint against one without, in each.
 */
export function renderHeadline(quiet: Run, busy: Run): string {
  const multiple = (run: Run, row: Row): number | undefined => {
    const floor = run.rows.find(
      (r) => r.scenario === row.scenario && r.size === row.size && r.backend === 'floor',
    );
    return floor ? row.cpuMicrosPerRequest / floor.cpuMicrosPerRequest : undefined;
  };
  const cell = (run: Run, row: Row | undefined) => {
    const times = row && multiple(run, row);
    if (!row || times === undefined) return '– | –';
    const floor = row.cpuMicrosPerRequest / times;
    return `${fixed(row.cpuMicrosPerRequest, 0)} / ${fixed(floor, 0)} | **${fixed(times, 2)}**`;
  };
  const services = quiet.rows.filter((r) => r.backend === 'sqlite' || r.backend === 'postgres');
  /** The same scenario, target and size in the other run. */
  const twin = (run: Run, row: Row) =>
    run.rows.find((r) => r.scenario === row.scenario && r.target === row.target && r.size === row.size);
  const lines = [
    `Quiet: ${quiet.date}, \`${quiet.command}\`, load average ${fixed(quiet.loadAverage?.[0] ?? Number.NaN, 2)} → ${fixed(quiet.loadAverage?.[1] ?? Number.NaN, 2)}. ` +
      `With a neighbour: ${busy.date}, \`${busy.command}\` (${busy.neighbour ?? 'no neighbour recorded'}). ` +
      `Machine: ${quiet.machine.nproc} cores (${quiet.machine.cpu}), Node.js ${quiet.machine.node}; ${quiet.connections} connections, ${measured(quiet, 'per target')}.`,
    '',
    '| scenario | target | pets | quiet: CPU µs/req, service / floor | quiet: × floor | neighbour: CPU µs/req, service / floor | neighbour: × floor | goal |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const row of services) {
    const goal = FLOOR_GOALS[row.scenario];
    lines.push(
      `| ${row.scenario} | ${row.target} | ${sizeLabel(row.size)} | ${cell(quiet, row)} | ${cell(busy, twin(busy, row))} | ${goal === undefined ? '–' : `≤ ${fixed(goal, 1)}`} |`,
    );
  }
  const hooked = services.filter((r) => r.scenario === 'create-with-webhook');
  if (hooked.length > 0) {
    lines.push(
      '',
      '| target | pets | create with one webhook endpoint, CPU per request × create without: quiet | with a neighbour | goal | deliveries per create in the window: quiet | with a neighbour |',
    );
    lines.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
    const cost = (run: Run, row: Row) => {
      const hook = run.rows.find(
        (r) => r.scenario === 'create-with-webhook' && r.target === row.target && r.size === row.size,
      );
      const plain = run.rows.find(
        (r) => r.scenario === 'create' && r.target === row.target && r.size === row.size,
      );
      return hook && plain ? fixed(hook.cpuMicrosPerRequest / plain.cpuMicrosPerRequest, 2) : '–';
    };
    for (const row of hooked)
      lines.push(
        `| ${row.target} | ${sizeLabel(row.size)} | ${cost(quiet, row)} | ${cost(busy, row)} | ≤ 1.15 | ${delivered(row)} | ${delivered(twin(busy, row))} |`,
      );
  }
  return `${lines.join('\n')}\n`;
}
