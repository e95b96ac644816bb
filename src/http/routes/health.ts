import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import type { Storage } from '../../domain/storage.js';
import { unavailable } from '../request/errors.js';
import { errorResponse, response } from '../schemas/responses.js';

/** A probe that waits longer than a load balancer's own probe timeout (often 1 to 2 s) says nothing. */
const READY_TIMEOUT_MS = 1_000;

/** `work`, or a rejection once `ms` have passed: the work itself goes on, bounded by its own timeouts. */
function withinDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

/**
 * How old a readiness answer may be. Each probe is a committed write (an fsync on SQLite, a row update
 * on PostgreSQL), and /readyz needs no key: a flood of probes cut getPet from 16.5k to 2.0k requests/s.
 * So the database is probed at most once per this interval per process, and every caller in between
 * gets the last answer (concurrent callers share the probe under way).
 */
export const READY_ANSWER_MAX_AGE_MS = 1_000;

type Readiness = { ready: true } | { ready: false; reason: string };

/** The last readiness answer and when its probe began; one probe at a time. */
class ReadinessProbe {
  readonly #storage: Storage;
  readonly #now: () => number;
  #last: { answer: Readiness; at: number } | undefined;
  #probing: Promise<Readiness> | undefined;

  constructor(storage: Storage, now: () => number) {
    this.#storage = storage;
    this.#now = now;
  }

  check(): Promise<Readiness> {
    const now = this.#now();
    if (this.#last && now - this.#last.at < READY_ANSWER_MAX_AGE_MS)
      return Promise.resolve(this.#last.answer);
    this.#probing ??= withinDeadline(this.#storage.ping(), READY_TIMEOUT_MS)
      .then(
        (): Readiness => ({ ready: true }),
        (error: Error): Readiness => ({ ready: false, reason: error.message }),
      )
      .then((answer) => {
        this.#last = { answer, at: now };
        this.#probing = undefined;
        return answer;
      });
    return this.#probing;
  }
}

/** The probes' body; `example` is what the probe answers when all is well. */
const Status = (example: string) =>
  Type.Object({ status: Type.String() }, { additionalProperties: false, examples: [{ status: example }] });
const NO_DATABASE = 'the database cannot read or write now';

/** Probes for a load balancer or orchestrator; outside /v1 and without a key. */
const routes: FastifyPluginAsync<{ storage: Storage; now: () => Date }> = async (app, { storage, now }) => {
  const readiness = new ReadinessProbe(storage, () => now().getTime());
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'health',
        summary: 'Liveness: the process is up',
        tags: ['operations'],
        security: [],
        servers: [{ url: '/', description: 'Outside /v1' }],
        response: { 200: response('The process is up', Status('ok')) },
      },
    },
    async () => ({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'ready',
        summary: 'Readiness: the database answers',
        description:
          'The database is probed with a committed write at most once a second per process; callers in between get the last answer, so an answer is at most a second old.',
        tags: ['operations'],
        security: [],
        servers: [{ url: '/', description: 'Outside /v1' }],
        response: {
          200: response('Ready to serve: the database took a write within a second', Status('ready')),
          503: errorResponse(
            'The database cannot read or write now, or did not answer within a second',
            { unavailable: NO_DATABASE },
            { 'Retry-After': Type.String({ description: 'Seconds to wait before asking again.' }) },
          ),
        },
      },
    },
    async (request) => {
      const answer = await readiness.check();
      if (!answer.ready) {
        request.log.warn({ reason: answer.reason }, 'readiness check failed');
        throw unavailable(NO_DATABASE);
      }
      return { status: 'ready' };
    },
  );
};

export const healthRoutes = fp(routes, {
  name: 'health-routes',
  fastify: '5.x',
  dependencies: ['route-fallbacks', 'openapi'],
});
