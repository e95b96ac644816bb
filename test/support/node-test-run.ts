import { spawn } from 'node:child_process';

/** How a test run in a process of its own ended: its exit code (null if killed), its output. */
export interface NodeTestRun {
  code: number | null;
  /** stdout and stderr, as they came. */
  output: string;
  /** Whether it was killed at `timeoutMs`, rather than ending by itself. */
  killed: boolean;
}

/**
 * Runs `node [nodeArgs] --test --test-reporter=spec <files>`: a test run of its own, not a subtest of
 * this one (without this process's NODE_TEST_CONTEXT), with `env` over this process's environment.
 */
export function runNodeTest(
  files: string[],
  {
    nodeArgs = [],
    cwd,
    env = {},
    timeoutMs,
  }: { nodeArgs?: string[]; cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<NodeTestRun> {
  const { NODE_TEST_CONTEXT: _, ...parentEnv } = process.env;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, '--test', '--test-reporter=spec', ...files], {
      cwd,
      env: { ...parentEnv, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: timeoutMs,
    });
    let output = '';
    const collect = (chunk: Buffer) => {
      output += chunk.toString();
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output, killed: child.killed }));
  });
}
