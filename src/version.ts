import { readFileSync } from 'node:fs';

/**
 * The version of this build: package.json's, read once at start (from src/ and from dist/ alike, the
 * file is one folder up). `petstore --version`, the first start line and petstore_build_info show it.
 */
export const VERSION: string = JSON.parse(
  readFileSync(new URL('../package.json', import.meta.url), 'utf8'),
).version;

/** The Node.js release this process runs on, e.g. v20.20.2. */
export const NODE_VERSION: string = process.version;
