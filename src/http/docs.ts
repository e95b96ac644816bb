import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

/**
 * The interactive reference at /docs: Swagger UI rendering the served OpenAPI document, every asset
 * served from the swagger-ui-dist package (no CDN: it works offline). Its pages carry a content
 * security policy that allows only the service's own scripts, with hashes for the inline ones.
 */
export async function registerDocs(app: FastifyInstance): Promise<void> {
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
    uiConfig: {
      layout: 'BaseLayout', // no top bar: it only offers to explore other documents
      deepLinking: true, // /docs#/pets/listPets: the address the deprecation Link points at
      displayOperationId: true,
      displayRequestDuration: true,
      tryItOutEnabled: true,
      persistAuthorization: false,
      validatorUrl: null, // never call swagger.io's online validator
      defaultModelsExpandDepth: 1,
    },
  });
}
