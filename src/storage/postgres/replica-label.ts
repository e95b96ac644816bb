/**
 * `host:port/database` of a postgres:// URL that parses into exactly those parts, else undefined: a
 * password holding an unescaped `/` or `@` moves the rest of the URL into its path, where a name
 * made from the path would show the password.
 */
export function replicaLabel(url: string): string | undefined {
  if (!URL.canParse(url)) return undefined;
  const parsed = new URL(url);
  if (!/^postgres(ql)?:$/.test(parsed.protocol) || parsed.hostname === '') return undefined;
  if (!/^(\/[^/@:]*)?$/.test(parsed.pathname) || parsed.hash !== '') return undefined;
  return `${parsed.hostname}:${parsed.port || '5432'}${parsed.pathname}`;
}
