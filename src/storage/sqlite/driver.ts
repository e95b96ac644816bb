import { createRequire } from 'node:module';
import type Database from 'better-sqlite3';

const require = createRequire(import.meta.url);

/**
 * better-sqlite3, the line that runs on this Node.js. 13.x is built on Node-API 10 (Node.js 22.14 and
 * later): loaded on Node.js 20 (Node-API 9) it crashes the process. There 12.x is used instead, from the
 * optional package better-sqlite3-node20 (packages/better-sqlite3-node20), which npm installs on Node.js 20
 * only. 12.x cannot serve the later lines: built for Node.js 24 it aborts the process when the garbage
 * collector frees a statement (`RemoveEnvironmentCleanupHook … (env) != nullptr`). The two share one API.
 */
function load(): typeof Database {
  if (Number(process.versions.napi) >= 10) return require('better-sqlite3');
  try {
    return require('better-sqlite3-node20');
  } catch (error) {
    throw new Error(
      `SQLite needs Node.js 20.12 or later on the 20 line, or 22.14 or later (this is ${process.version}); ` +
        'on Node.js 20, install with optional dependencies (npm ci without --omit=optional)',
      { cause: error },
    );
  }
}

export const BetterSqlite3: typeof Database = load();
