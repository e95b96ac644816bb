import type pg from 'pg';

/** One node of a PostgreSQL plan, as `EXPLAIN (FORMAT JSON)` writes it: the fields the tests read. */
export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

/**
 * The plan PostgreSQL makes for `sql` with `params`, sent as the service sends its statements
 * (unnamed, with their values): planned for the tables as they are now.
 */
export async function explain(client: pg.Client, sql: string, params: unknown[] = []): Promise<PlanNode> {
  const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
    `EXPLAIN (FORMAT JSON) ${sql}`,
    params,
  );
  return (rows[0] as { 'QUERY PLAN': [{ Plan: PlanNode }] })['QUERY PLAN'][0].Plan;
}

/** Every node of a plan, the root first. */
export const planNodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(planNodes)];
