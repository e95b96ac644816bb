/**
 * Node keeps only the first of repeated Authorization and Content-Type headers, so a request with two
 * would be judged by whichever came first. Such a request is ambiguous: it is refused instead.
 */
export function isRepeated(rawHeaders: readonly string[], name: string): boolean {
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (
      (rawHeaders[i] as string).length === name.length &&
      (rawHeaders[i] as string).toLowerCase() === name
    ) {
      seen++;
      if (seen > 1) return true;
    }
  }
  return false;
}
