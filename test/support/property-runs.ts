/**
 * How many runs each fast-check property makes: `fallback`, a modest fixed number that keeps the suite
 * quick, unless PETSTORE_TEST_PROPERTY_RUNS asks for more (e.g. 1000, to search harder before a release).
 * A failure prints fast-check's seed and the shrunk case whatever the number.
 */
export function propertyRuns(fallback: number): number {
  const asked = Number(process.env.PETSTORE_TEST_PROPERTY_RUNS);
  return Number.isInteger(asked) && asked > 0 ? asked : fallback;
}
