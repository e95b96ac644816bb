/**
 * The one way into the benchmarks: `npm run bench -- <tool or scenario> [its options]`; bench/README.md
 * says what each measures, how to run it and what it prints.
 *
 * - nothing, or options only (`npm run bench -- --quick`): every scenario, bench/run.ts, as always;
 * - a scenario's name (`get`, `create`, `delivery-lag`, …): bench/run.ts with `--scenarios <name>`;
 * - a tool's name (`profile`, `delivery-cost`, …): that tool, given the options that follow;
 * - `help`: the list.
 *
 * Each tool is its own module, run by importing it with its name taken out of process.argv, so that it
 * reads its options as it would alone.
 */
import { SCENARIOS } from './scenarios.js';

const TOOLS: Record<string, { measures: string; run: () => Promise<unknown> }> = {
  run: {
    measures:
      'every scenario: the service against the reference, the Fastify floor and Express (the default)',
    run: () => import('./run.js'),
  },
  profile: { measures: "where the service's CPU per request goes", run: () => import('./profile.js') },
  'side-by-side': {
    measures: 'builds or settings loaded at the same moment, as multiples of the floor',
    run: () => import('./side-by-side.js'),
  },
  'create-request-path': {
    measures: "a create's CPU on the request path, with one webhook endpoint against none",
    run: () => import('./create-request-path.js'),
  },
  'delivery-cost': {
    measures: 'what one delivery costs a --role deliver process',
    run: () => import('./delivery-cost.js'),
  },
  'event-stream': {
    measures: "the live event stream's latency across nodes, and what idle streams cost a read",
    run: () => import('./event-stream.js'),
  },
  capacity: {
    measures: "the capacity model's costs, on a primary and a streaming replica",
    run: () => import('./capacity.js'),
  },
  'pg-drivers': { measures: 'the PostgreSQL drivers compared', run: () => import('./pg-drivers.js') },
  'sse-parsers': {
    measures: "the client's stream reader against eventsource-parser bare",
    run: () => import('./sse-parsers.js'),
  },
};
/** Scenarios of bench/run.ts that may be named alone. */
const RUN_SCENARIOS: readonly string[] = [...SCENARIOS, 'delivery-lag'];

const name = process.argv[2];
if (name === undefined || name.startsWith('-')) await TOOLS.run?.run();
else if (name === 'help') {
  console.log('npm run bench -- <tool or scenario> [options]   (bench/README.md)\n\ntools:');
  for (const [tool, { measures }] of Object.entries(TOOLS)) console.log(`  ${tool.padEnd(20)} ${measures}`);
  console.log(`\nscenarios (bench/run.ts --scenarios <name>):\n  ${RUN_SCENARIOS.join(', ')}`);
} else if (TOOLS[name]) {
  process.argv.splice(2, 1);
  await TOOLS[name].run();
} else if (RUN_SCENARIOS.includes(name)) {
  process.argv.splice(2, 1, '--scenarios', name);
  await TOOLS.run?.run();
} else {
  console.error(`npm run bench: no tool or scenario "${name}"; npm run bench -- help lists them`);
  process.exitCode = 2;
}
