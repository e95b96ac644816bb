import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/**
 * The repository root, where README.md, CHANGELOG.md and docs/ are: package.json's real folder, so the
 * same from the tests' build (.test-build/, where package.json is a link to the root's).
 */
export const REPO_ROOT_URL = new URL(
  './',
  pathToFileURL(realpathSync(new URL('../../package.json', import.meta.url))),
);

/** The front page. */
export const READ_ME = 'README.md';

/** One of the repository's documents, by its path from the root: README.md, docs/operations.md, … */
export function readDoc(path: string): string {
  return readFileSync(new URL(path, REPO_ROOT_URL), 'utf8');
}

/** The documents a reader has: README.md, CHANGELOG.md and every docs/*.md, by path. */
export function documents(): Map<string, string> {
  const paths = [
    'README.md',
    'CHANGELOG.md',
    ...readdirSync(new URL('docs/', REPO_ROOT_URL))
      .filter((name) => name.endsWith('.md'))
      .sort()
      .map((name) => `docs/${name}`),
  ];
  return new Map(paths.map((path) => [path, readDoc(path)]));
}

/** Every document's text with line breaks as spaces: for a quotation, wherever it is and however wrapped. */
export function allDocsOnOneLine(): string {
  return [...documents().values()].join('\n').replaceAll(/\s*\n\s*/g, ' ');
}
