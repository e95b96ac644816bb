import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, onRequestHookHandler, onSendHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError } from '../request/errors.js';
import { EXACT_JSON_SCRIPT } from './docs-exact-json.js';
import { FixedAnswer } from './fixed-answer.js';

/** How many addresses under /docs keep a compressed answer. */
const FIXED_ANSWERS_LIMIT = 64;

/** The page's script global (docs-exact-json.ts), as the page's own code reaches it. */
interface DocsPageGlobal {
  PetstoreExactJson: { plugin: (system: unknown) => { wrapComponents: Record<string, unknown> } };
}

/**
 * The interactive reference at /docs: Swagger UI rendering the served OpenAPI document, every asset
 * served from the swagger-ui-dist package (no CDN: it works offline). Its pages carry a content
 * security policy that allows only the service's own scripts, with hashes for the inline ones.
 */
export const docs = fp(
  async (app: FastifyInstance) => {
    // Every answer under /docs is fixed while the process runs (the page, its scripts and styles):
    // each is compressed once and sent with an ETag (FixedAnswer), not compressed again per request.
    const fixed = new Map<string, FixedAnswer>();
    // The validators and Accept-Encoding are taken off the request before @fastify/static and
    // @fastify/compress see them: one would answer 304 or 206 about the file, with its own ETag, the
    // other compress it again. The answer sent is FixedAnswer's, coding and validators included.
    const taken = new WeakMap<object, { ifNoneMatch?: string; acceptEncoding?: string }>();
    const takeHeaders: onRequestHookHandler = (request, _reply, done) => {
      const { 'if-none-match': ifNoneMatch, 'accept-encoding': acceptEncoding } = request.headers;
      taken.set(request, { ifNoneMatch, acceptEncoding });
      for (const name of [
        'if-none-match',
        'if-modified-since',
        'if-match',
        'if-range',
        'range',
        'accept-encoding',
      ])
        delete request.headers[name];
      done();
    };
    const answerFixed: onSendHookHandler = async (request, reply, payload) => {
      if (reply.statusCode !== 200 || payload === null) return payload;
      const url = request.url.split('?')[0] as string;
      let answer = fixed.get(url);
      let { ifNoneMatch, acceptEncoding } = taken.get(request) ?? {};
      if (answer) {
        (payload as { destroy?: () => void }).destroy?.();
      } else {
        const body = payload instanceof Readable ? await buffer(payload) : Buffer.from(payload as string);
        answer = new FixedAnswer(body, String(reply.getHeader('content-type')));
        // The page has about fifteen files, but many addresses can name one (//, ./): past the bound
        // an answer is sent as it is, neither kept nor compressed, so no address costs memory or CPU.
        if (fixed.size < FIXED_ANSWERS_LIMIT) fixed.set(url, answer);
        else acceptEncoding = 'identity';
      }
      // @fastify/static's own validators describe the file, not the answer sent.
      reply.removeHeader('content-length').removeHeader('last-modified').removeHeader('accept-ranges');
      return answer.answer(request, reply, ifNoneMatch, acceptEncoding) ?? '';
    };
    app.addHook('onRoute', (route) => {
      if (!route.url?.startsWith('/docs')) return;
      route.onRequest = [takeHeaders, ...[route.onRequest ?? []].flat()];
      route.onSend = [...[route.onSend ?? []].flat(), answerFixed];
    });
    await app.register(swaggerUi, {
      routePrefix: '/docs',
      staticCSP: true,
      // Nothing from elsewhere: no fonts or styles over https:, no validator badge, and no
      // upgrade-insecure-requests, which would break the page where it is served over plain http.
      transformStaticCSP: (header) =>
        header
          .replace(/ https:/g, '')
          .replace(/ validator\.swagger\.io/g, '')
          .replace(/ upgrade-insecure-requests;/, '')
          .replace("frame-ancestors 'self'", "frame-ancestors 'none'")
          // Swagger UI sets a few inline styles at run time; scripts stay strictly 'self'.
          .replace("style-src 'self'", "style-src 'self' 'unsafe-inline'"),
      // A script of our own, from the service like every other (see docs-exact-json.ts).
      theme: {
        title: 'Animal store service',
        js: [{ filename: 'exact-json.js', content: EXACT_JSON_SCRIPT }],
      },
      uiHooks: {
        // Swagger UI's plugin also serves the document at /docs/json and /docs/yaml. One address for the
        // contract: the page's own request for it is sent on to /v1/openapi.json, the YAML copy is not served.
        onRequest: (request, reply, done) => {
          if (request.url === '/docs/json') reply.redirect('/v1/openapi.json', 308);
          else
            done(
              request.url === '/docs/yaml'
                ? new ApiError('not_found', 'no resource at this address')
                : undefined,
            );
        },
      },
      uiConfig: {
        layout: 'BaseLayout', // no top bar: it only offers to explore other documents
        deepLinking: true, // /docs#/pets/listPets: the address the deprecation Link points at
        displayOperationId: true,
        displayRequestDuration: true,
        tryItOutEnabled: true,
        persistAuthorization: false,
        validatorUrl: null, // never call swagger.io's online validator
        defaultModelsExpandDepth: 1,
        // Written into the page's initializer script as source text: it runs in the browser, where the
        // theme script above has defined the global by the time Swagger UI starts (on window load).
        plugins: [
          (system: unknown) => (globalThis as unknown as DocsPageGlobal).PetstoreExactJson.plugin(system),
        ],
      },
    });
  },
  { name: 'docs', fastify: '5.x', dependencies: ['openapi'] },
);
