// `npm run build`'s last step: the console (console/, served at /console by src/http/documents/console.ts),
// bundled with esbuild into dist/console/: app.js (every module of console/src, minified), app.css and
// index.html as they are. Nothing built is committed; a production install (`npm ci --omit=dev`) serves
// the dist/ built before it, like the rest of the service.
// Plain JavaScript: it runs where tsx is not installed.
import { copyFileSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const OUT = `${ROOT}dist/console/`;

mkdirSync(OUT, { recursive: true });
buildSync({
  absWorkingDir: ROOT,
  entryPoints: ['console/src/main.ts'],
  outfile: `${OUT}app.js`,
  bundle: true,
  minify: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  tsconfig: 'console/tsconfig.json',
  legalComments: 'none',
  logLevel: 'warning',
});
for (const file of ['index.html', 'app.css']) copyFileSync(`${ROOT}console/${file}`, `${OUT}${file}`);
