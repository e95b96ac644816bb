/** `'a', 'b', 'c'`: a list of known constants (never user input) for an SQL `IN (…)` or `CHECK`. */
export const sqlList = (values: readonly string[]): string => values.map((value) => `'${value}'`).join(', ');
