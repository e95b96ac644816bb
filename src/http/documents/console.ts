import { existsSync, readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { FixedAnswer } from './fixed-answer.js';

/**
 * Where `npm run build` writes the console (scripts/build-console.js), from dist/http/documents/ or
 * src/http/documents/ alike.
 */
const BUILT = new URL('../../../dist/console/', import.meta.url);

/**
 * The console's own policy: its script, its style sheet and requests to this origin, nothing inline,
 * nothing from elsewhere, and never framed.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const FILES = [
  ['/console', 'index.html', 'text/html; charset=utf-8'],
  ['/console/app.js', 'app.js', 'text/javascript; charset=utf-8'],
  ['/console/app.css', 'app.css', 'text/css; charset=utf-8'],
] as const;

/**
 * The console at /console (docs/console.md): a page of the service's own, built from console/ into
 * dist/console/ by `npm run build`, using only the public API with the key its user signs in with. Its
 * three files never change while the process runs: each is compressed once and sent with an ETag
 * (FixedAnswer). Not an API operation, so not in the OpenAPI document. A tree built without it (no
 * dist/console/) answers its address 404, as any unknown one.
 */
export const consolePage = fp(
  async (app: FastifyInstance) => {
    if (!existsSync(new URL('index.html', BUILT))) {
      app.log.debug('the console is not built (dist/console/ is missing): /console is not served');
      return;
    }
    for (const [url, file, type] of FILES) {
      const answer = new FixedAnswer(readFileSync(new URL(file, BUILT)), type);
      // Not an operation of the API: left out of the OpenAPI document (hide), as the docs page's routes are.
      app.get(url, { compress: false, schema: { hide: true } }, (request, reply) => {
        reply
          .header('Content-Security-Policy', CONSOLE_CSP)
          .header('X-Content-Type-Options', 'nosniff')
          .header('Referrer-Policy', 'no-referrer');
        return answer.send(request, reply);
      });
    }
    // The page's address with a slash: the same page, at one address.
    app.get('/console/', { schema: { hide: true } }, (_request, reply) => reply.redirect('/console', 308));
  },
  { name: 'console', fastify: '5.x' },
);
