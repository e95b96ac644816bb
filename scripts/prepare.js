// npm's `prepare`, run after every `npm install` or `npm ci` in this folder. With the development
// dependencies installed it builds (TypeScript into dist/). Without them (`npm ci --omit=dev`, the
// production install of a tree built beforehand) there is no compiler and nothing to build: it exits 0
// and says nothing, unless there is no build either, which it names (the install itself has worked).
// Plain JavaScript: it runs where tsx and TypeScript are not installed.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

const root = new URL('../', import.meta.url);

function typescriptInstalled() {
  try {
    createRequire(new URL('package.json', root)).resolve('typescript');
    return true;
  } catch {
    return false;
  }
}

if (typescriptInstalled()) {
  const build = spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
  process.exit(build.status ?? 1);
} else if (!existsSync(new URL('dist/cli/main.js', root))) {
  process.stderr.write(
    'petstore: installed without development dependencies, so nothing was built, and dist/ holds no build: ' +
      'build first (npm ci && npm run build), then npm ci --omit=dev\n',
  );
}
