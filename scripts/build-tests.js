// npm test's second build step (after `npm run build`): every TypeScript file of the repository (src,
// test, support, bench, scripts, the client) transpiled once into .test-build/, so that each test file's
// process runs JavaScript without a loader. Under tsx every file's process loaded the service through
// its hooks, about 0.9 CPU-seconds more per file than the same modules compiled (issue 38). esbuild
// transpiles file by file, types removed as written (verbatimModuleSyntax): 1 CPU-second for the whole
// tree where tsc took 19. Types are `npm run typecheck`'s to check.
//
// .test-build/ mirrors the repository: beside each compiled file its source (a symlink, for the tests
// that start a .ts file through tsx), and a symlink to every other file and top-level entry (package.json,
// docs/, dist/, the packages...), so paths a test or the service builds from import.meta.url lead where
// they lead in the source tree.
// Plain JavaScript: it runs before anything is compiled.
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const OUT = join(ROOT, '.test-build');
/** The folders compiled (packages/ for packages/client/src). */
const COMPILED = new Set(['src', 'test', 'support', 'bench', 'scripts', 'packages']);
/** Never mirrored: the repository's own metadata, the build itself, and what Node finds by walking up. */
const LEFT_OUT = new Set(['.git', '.test-build', 'node_modules', '.stryker-tmp']);

/** Every TypeScript file below the compiled folders (relative to ROOT), declarations left out. */
function typeScriptFiles(dir) {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : typeScriptFiles(path);
    return /\.(ts|mts)$/.test(entry.name) && !/\.d\.m?ts$/.test(entry.name) ? [path] : [];
  });
}

const sources = [...COMPILED]
  .filter((dir) => existsSync(join(ROOT, dir)))
  .flatMap((dir) => typeScriptFiles(dir));
buildSync({
  absWorkingDir: ROOT,
  entryPoints: sources,
  outdir: OUT,
  outbase: ROOT,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: true,
  tsconfig: join(ROOT, 'tsconfig.json'),
  logLevel: 'warning',
});

/** A symlink at `at` to `target` (relative), replacing whatever was there unless it is that link already. */
function link(target, at) {
  const wanted = relative(dirname(at), target);
  try {
    const stat = lstatSync(at);
    if (stat.isSymbolicLink() && readlinkSync(at) === wanted) return;
    rmSync(at, { recursive: true, force: true });
  } catch {
    // nothing there yet
  }
  mkdirSync(dirname(at), { recursive: true });
  symlinkSync(wanted, at);
}

/** Whether a folder holds TypeScript that tsc compiles (anywhere beneath it). */
function holdsTypeScript(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules') continue;
    if (entry.isDirectory() ? holdsTypeScript(join(dir, entry.name)) : /\.(ts|tsx|mts|cts)$/.test(entry.name))
      return true;
  }
  return false;
}

/** Mirrors `dir` (relative to ROOT): compiled folders are walked, any other file or folder linked. */
function mirror(dir) {
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = join(dir, entry.name);
    const source = join(ROOT, path);
    const at = join(OUT, path);
    if (entry.isDirectory() && entry.name !== 'node_modules' && holdsTypeScript(source)) {
      // tsc made this folder; a link left by an earlier layout would hide it
      if (existsSync(at) && lstatSync(at).isSymbolicLink()) rmSync(at);
      mkdirSync(at, { recursive: true });
      mirror(path);
    } else if (!(existsSync(at) && lstatSync(at).isFile())) {
      // (a regular file there is tsc's output, of a .ts of the same name)
      link(source, at);
    }
  }
}

for (const entry of readdirSync(ROOT)) {
  if (LEFT_OUT.has(entry)) continue;
  if (COMPILED.has(entry) && statSync(join(ROOT, entry)).isDirectory()) {
    mkdirSync(join(OUT, entry), { recursive: true });
    mirror(entry);
  } else link(join(ROOT, entry), join(OUT, entry));
}

/**
 * Test files that keep a process of their own: tracing registers a global tracer provider and
 * config.test sets process.env, which other files would see; the faults and the docs page's browser
 * are about processes and time, and run beside the groups rather than inside one; so does the console's.
 */
const ALONE = [
  /^test\/(tracing|faults)\//,
  /^test\/config\/config\.test\.ts$/,
  /^test\/cli\/tracing\.test\.ts$/,
  /^test\/docs\//,
  /^test\/console\//,
];
/**
 * How many processes the other test files share. Each file in a process of its own cost about 1 CPU-s
 * of start-up (Node.js 20: loading the runner, the service's modules and a database driver again);
 * six processes, three at a time (--test-concurrency), keep both cores busy with a third of that.
 */
const GROUPS = 6;
/** Imported by every group before its test files. */
const STALL_WATCH = 'test/support/stall-watch.ts';

// .test-build/groups/: what `npm test` runs. Each group file imports its test files in turn, so their
// tests register in that one process and run there, file after file.
const testFiles = typeScriptFiles('test')
  .filter((file) => /\.test\.ts$/.test(file) && !file.startsWith('test/image/'))
  .sort();
const groupsDir = join(OUT, 'groups');
rmSync(groupsDir, { recursive: true, force: true });
mkdirSync(groupsDir, { recursive: true });
const shared = testFiles.filter((file) => !ALONE.some((pattern) => pattern.test(file)));
const entries = [
  ...Array.from({ length: GROUPS }, (_, i) => ({
    name: `shared-${i + 1}`,
    files: shared.filter((_, n) => n % GROUPS === i),
  })),
  ...testFiles
    .filter((file) => ALONE.some((pattern) => pattern.test(file)))
    .map((file) => ({
      name: file.slice('test/'.length, -'.test.ts'.length).replaceAll('/', '-'),
      files: [file],
    })),
];
for (const { name, files } of entries) {
  // First the watch that fails a process stuck in one test (test/support/stall-watch.ts), then the files.
  const imports = [STALL_WATCH, ...files].map(
    (file) => `await import('../${file.replace(/\.ts$/, '.js')}');`,
  );
  writeFileSync(join(groupsDir, `${name}.test.js`), `${imports.join('\n')}\n`);
}
