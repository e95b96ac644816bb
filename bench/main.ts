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
import { RUN_SCENARIOS, TOOLS } from './tools.js';

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
