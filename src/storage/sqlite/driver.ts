import { createRequire } from 'node:module';
import type Database from 'better-sqlite3';

/**
 * better-sqlite3, the line that runs on this Node.js. 13.x is built on Node-API 10 (Node.js 22.14 and
 * later): loaded on Node.js 20 (Node-API 9) it crashes the process. There 12.x is used instead, from the
 * optional package better-sqlite3-node20 (packages/better-sqlite3-node20), which npm installs on Node.js 20
 * only. 12.x cannot serve the later lines: built for Node.js 24 it aborts the process when the garbage
 * collector frees a statement (`RemoveEnvironmentCleanupHook … (env) != nullptr`). The two share one API.
 *
 * `napi` and `require` are this process's own, given here so that a test can load from an arrangement of
 * packages of its own.
 */
export function loadBetterSqlite3(napi: number, require: NodeJS.Require): typeof Database {
  if (napi >= 10) return require('better-sqlite3');
  // Where the package's own node_modules is missing (an install interrupted, or copied without it), its
  // require('better-sqlite3') finds the root's 13 instead, and the process dies of a segmentation fault
  // at the first statement: refuse before loading anything, saying what to run.
  let version: string | undefined;
  try {
    const fromPackage = createRequire(require.resolve('better-sqlite3-node20'));
    version = (fromPackage('better-sqlite3/package.json') as { version: string }).version;
  } catch {
    version = undefined;
  }
  if (version?.split('.')[0] !== '12') {
    throw new Error(
      `better-sqlite3 12 for Node.js 20 is not installed (packages/better-sqlite3-node20 ${version === undefined ? 'has none' : `finds ${version}, which needs Node-API 10`}): ` +
        `run \`npm install\` (or \`npm ci\`), without --omit=optional, on Node.js 20.12 or later (this is ${process.version}), or run on Node.js 22.14 or later`,
    );
  }
  return require('better-sqlite3-node20');
}

export const BetterSqlite3: typeof Database = loadBetterSqlite3(
  Number(process.versions.napi),
  createRequire(import.meta.url),
);
