import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { SchemaObject } from 'ajv';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Config } from './config/config.js';
import { ApiKeyVerifier } from './domain/api-keys.js';
import { CursorCodec } from './domain/paging.js';
import { PetCatalog } from './domain/pet-catalog.js';
import { requireApiKey } from './http/auth.js';
import { registerCors } from './http/cors.js';
import { registerDocs } from './http/docs.js';
import { installDraining } from './http/draining.js';
import { installErrorHandling, sendError, toApiError } from './http/errors.js';
import { installJsonBodyParser } from './http/json-body.js';
import { Links } from './http/links.js';
import { registerMetrics, ServiceMetrics } from './http/metrics.js';
import { registerOpenApi } from './http/openapi.js';
import { requestIdFor, setCommonHeaders } from './http/request-id.js';
import { RequestLog } from './http/request-log.js';
import { healthRoutes } from './http/routes/health.js';
import { petRoutes } from './http/routes/pets.js';
import { installRouteFallbacks } from './http/routing.js';
import { ErrorBody } from './http/schemas/error.js';
import { PET_SCHEMAS } from './http/schemas/pet.js';
import { createValidatorCompiler, describeValidationErrors } from './http/validation.js';
import type { Storage } from './storage/storage.js';

export interface AppOptions {
  config: Config;
  storage: Storage;
  /** The clock; tests set it to stand on either side of getPet's sunset. */
  now?: () => Date;
  /** A pino logger configuration or instance; defaults to JSON lines on stdout at config.logLevel. */
  logger?: FastifyServerOptions['logger'] | FastifyServerOptions['loggerInstance'];
}

const SHARED_SCHEMAS = [ErrorBody, ...PET_SCHEMAS] as unknown as SchemaObject[];

/** Composes the service: plugins, error handling, then routes. Listening is server.ts's job. */
export async function buildApp({ config, storage, now = () => new Date(), logger }: AppOptions) {
  const app = Fastify({
    ...(logger && typeof (logger as { info?: unknown }).info === 'function'
      ? { loggerInstance: logger as FastifyServerOptions['loggerInstance'] }
      : {
          logger: (logger as FastifyServerOptions['logger']) ?? {
            level: config.logLevel,
            redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' },
          },
        }),
    bodyLimit: config.bodyLimit,
    return503OnClosing: false, // see installDraining
    logController: new RequestLog(),
    requestIdHeader: false, // taken by genReqId only once validated
    genReqId: requestIdFor,
    // Long enough that any petId reaches its own validation (Node caps a request head at 16 KiB anyway).
    routerOptions: { maxParamLength: 16 * 1024 },
    schemaErrorFormatter: (errors, httpPart) => new Error(describeValidationErrors(errors, httpPart)),
    // Errors found before routing (a malformed URL) take the same Error body as every other.
    frameworkErrors: (error, _request, reply) => sendError(reply, toApiError(error)),
  }).withTypeProvider<TypeBoxTypeProvider>();

  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  app.setValidatorCompiler(createValidatorCompiler(SHARED_SCHEMAS));
  installJsonBodyParser(app, config.bodyLimit);
  installErrorHandling(app);
  installDraining(app);
  installRouteFallbacks(app);
  await registerOpenApi(app, config);
  await registerCors(app, config.corsOrigins);
  await registerDocs(app);

  app.addHook('onRequest', async (_request, reply) => {
    setCommonHeaders(reply);
  });

  const metrics = new ServiceMetrics(storage);
  registerMetrics(app, metrics);
  const store = metrics.instrument(storage);
  const links = new Links(config.publicBaseUrl);
  const catalog = new PetCatalog(store.pets, new CursorCodec(await store.sharedSecret('cursor')));
  const verifier = new ApiKeyVerifier(store.apiKeys, config.apiKeys);

  await app.register(healthRoutes, { storage });
  await app.register(
    async (v1) => {
      requireApiKey(v1, verifier);
      await v1.register(petRoutes, { catalog, links, now });
    },
    { prefix: '/v1' },
  );
  await app.ready();
  return app as unknown as FastifyInstance;
}
