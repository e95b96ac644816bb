import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { SamplingDecision, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-node';
import Fastify, { type FastifyInstance } from 'fastify';
import { eventCause } from '../../src/domain/event-cause.js';
import type { ClaimedDelivery } from '../../src/domain/webhooks.js';
import { CreateBatcher } from '../../src/storage/create-batcher.js';
import { serverSpans } from '../../src/tracing/server-spans.js';
import { StorageSpans } from '../../src/tracing/storage-spans.js';
import {
  attributeValueLengthLimit,
  SHUTDOWN_EXPORT_MS,
  samplerFrom,
  startTracing,
  type Tracing,
} from '../../src/tracing/tracing.js';
import { VERSION } from '../../src/version.js';
import type { SendResult } from '../../src/webhooks/sender.js';
import { OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { registersAfter } from '../support/plugin-order.js';

/**
 * The spans the service makes, in process: startTracing as server.ts calls it (configured by the
 * OTEL_* variables of the process), exporting over OTLP/HTTP to a receiver in this process; the server
 * spans of a small Fastify app with the service's plugin, called through inject; a delivery attempt's
 * span. Each test starts tracing with its variables and shuts it down, which exports every span ended.
 */

const UNSET = 0;
const ERROR = 2;
const CALLER_SPAN = '00f067aa0ba902b7';

let otlp: OtlpReceiver;
before(async () => {
  otlp = await OtlpReceiver.start();
});
after(() => otlp.close());

/** Tracing started with these OTEL_* variables (the process's own restored afterwards). */
function tracingWith(env: Record<string, string>): Tracing {
  const all: Record<string, string> = { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint, ...env };
  const saved = Object.fromEntries(Object.keys(all).map((name) => [name, process.env[name]]));
  Object.assign(process.env, all);
  try {
    return startTracing('sqlite');
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

/** A small app with the service's server-span plugin, answering each status the tests need. */
async function appWith(tracing: Tracing): Promise<FastifyInstance> {
  const app = Fastify();
  await app.register(tracing.serverSpans, { tracer: tracing.tracer });
  app.get('/v1/pets/:petId', async () => ({ id: 1 }));
  app.get('/unauthorized', async (_request, reply) => reply.code(401).send({ code: 'unauthorized' }));
  app.get('/invalid', async (_request, reply) => reply.code(400).send({ code: 'invalid_request' }));
  app.get('/unavailable', async (_request, reply) => reply.code(503).send({ code: 'unavailable' }));
  app.get('/broken', async () => {
    throw new Error('broken');
  });
  await app.ready();
  return app;
}

/** A fresh trace id no other test uses. */
const newTraceId = () => crypto.randomUUID().replaceAll('-', '');

/** The spans of one trace the receiver got. */
const spansOf = (traceId: string): ReceivedSpan[] => otlp.spans.filter((span) => span.traceId === traceId);

/** The trace an answer's traceresponse names, and its sampled flag. */
function traceresponse(headers: Record<string, unknown>): { traceId: string; spanId: string; flags: string } {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/.exec(String(headers.traceresponse));
  assert.ok(match, `traceresponse: ${headers.traceresponse}`);
  return { traceId: match[1] as string, spanId: match[2] as string, flags: match[3] as string };
}

describe('attribute values are bounded', () => {
  test('when a 401 carries a 15,018-byte User-Agent and a 404 a 12,000-character path, then their spans export them cut at 2,048 characters (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT unset)', async () => {
    const tracing = tracingWith({});
    const app = await appWith(tracing);
    const userAgent = `Mozilla/5.0 ${'x'.repeat(15_018 - 12)}`;
    const path = `/${'p'.repeat(12_000)}`;
    const refused = await app.inject({ url: '/unauthorized', headers: { 'user-agent': userAgent } });
    const missing = await app.inject({ url: path });
    assert.deepEqual([refused.statusCode, missing.statusCode], [401, 404]);
    await app.close();
    await tracing.shutdown();
    const [refusedSpan] = spansOf(traceresponse(refused.headers).traceId);
    const [missingSpan] = spansOf(traceresponse(missing.headers).traceId);
    const exported = [refusedSpan?.attributes['user_agent.original'], missingSpan?.attributes['url.path']];
    assert.deepEqual(
      exported.map((value) => String(value).length),
      [2048, 2048],
    );
    assert.deepEqual(exported, [userAgent.slice(0, 2048), path.slice(0, 2048)], 'the start of each is kept');
  });

  test('when OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT is set, then it is the bound; OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT, when set, takes precedence', async () => {
    for (const [env, bound] of [
      [{ OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: '100' }, 100],
      [{ OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: '100', OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT: '50' }, 50],
      [{ OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: 'lots' }, 2048],
    ] as const) {
      const tracing = tracingWith(env);
      const app = await appWith(tracing);
      const userAgent = 'u'.repeat(3000);
      const answer = await app.inject({ url: '/v1/pets/7', headers: { 'user-agent': userAgent } });
      await app.close();
      await tracing.shutdown();
      const [span] = spansOf(traceresponse(answer.headers).traceId);
      const exported = String(span?.attributes['user_agent.original']);
      assert.equal(exported.length, bound, JSON.stringify(env));
      assert.equal(exported, userAgent.slice(0, bound));
      assert.equal(span?.attributes['url.path'], '/v1/pets/7', 'a short value is kept whole');
    }
  });
});

describe('a caller’s sampled flag does not decide', () => {
  test('when the ratio is 0 and a request carries traceparent flags 01, then nothing is exported; the answer names the caller’s trace, not sampled', async () => {
    const tracing = tracingWith({
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0',
    });
    const app = await appWith(tracing);
    const traceId = newTraceId();
    const answer = await app.inject({
      url: '/v1/pets/7',
      headers: { traceparent: `00-${traceId}-${CALLER_SPAN}-01` },
    });
    assert.equal(answer.statusCode, 200);
    await app.close();
    await tracing.shutdown();
    assert.deepEqual(
      { ...traceresponse(answer.headers), spanId: undefined },
      { traceId, spanId: undefined, flags: '00' },
    );
    assert.deepEqual(spansOf(traceId), []);
  });

  test('when the ratio is 1 and a request carries traceparent flags 00, then its span is exported all the same, as a child of the caller’s span', async () => {
    const tracing = tracingWith({
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '1',
    });
    const app = await appWith(tracing);
    const traceId = newTraceId();
    const answer = await app.inject({
      url: '/v1/pets/7',
      headers: { traceparent: `00-${traceId}-${CALLER_SPAN}-00` },
    });
    await app.close();
    await tracing.shutdown();
    assert.equal(traceresponse(answer.headers).flags, '01');
    assert.deepEqual(
      spansOf(traceId).map((span) => [span.name, span.parentSpanId]),
      [['GET /v1/pets/{petId}', CALLER_SPAN]],
    );
  });
});

describe('the sampler (samplerFrom)', () => {
  const sampled = SamplingDecision.RECORD_AND_SAMPLED;
  const dropped = SamplingDecision.NOT_RECORD;
  /** A trace id the trace-id ratio of 0.5 keeps: one a caller could pick to be always sampled. */
  const kept = (() => {
    const ratio = new TraceIdRatioBasedSampler(0.5);
    for (;;) {
      const id = newTraceId();
      if (ratio.shouldSample(ROOT_CONTEXT, id).decision === sampled) return id;
    }
  })();
  const decide = (env: Record<string, string>, random: number, parent?: { remote: boolean; flags: number }) =>
    samplerFrom(env, () => random).shouldSample(
      parent
        ? trace.setSpanContext(ROOT_CONTEXT, {
            traceId: kept,
            spanId: CALLER_SPAN,
            traceFlags: parent.flags,
            isRemote: parent.remote,
          })
        : ROOT_CONTEXT,
      kept,
      'GET /v1/pets',
      SpanKind.SERVER,
      {},
      [],
    ).decision;
  const half = { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.5' };
  const remoteSampled = { remote: true, flags: TraceFlags.SAMPLED };
  const remoteNot = { remote: true, flags: TraceFlags.NONE };

  test('when a caller sends a trace id the ratio keeps, flagged sampled, then a random draw decides, not the id or the flag', () => {
    assert.equal(decide(half, 0.99, remoteSampled), dropped);
    assert.equal(decide(half, 0.01, remoteSampled), sampled);
    assert.equal(decide(half, 0.01, remoteNot), sampled);
    assert.equal(decide(half, 0.5, remoteNot), dropped, 'the ratio is the bound, excluded');
    assert.equal(decide({ ...half, OTEL_TRACES_SAMPLER: 'traceidratio' }, 0.99, remoteSampled), dropped);
  });

  test('when there is no caller, then the trace id decides; a local parent’s decision is followed', () => {
    assert.equal(decide(half, 0.99), sampled, 'the ratio keeps this id');
    assert.equal(decide(half, 0.99, { remote: false, flags: TraceFlags.SAMPLED }), sampled);
    assert.equal(decide(half, 0.01, { remote: false, flags: TraceFlags.NONE }), dropped);
  });

  test('when the sampler is on or off, then a caller’s flag changes nothing; unset or unknown is on; a bad ratio is 1', () => {
    for (const [env, decision] of [
      [{}, sampled],
      [{ OTEL_TRACES_SAMPLER: 'nonsense' }, sampled],
      [{ OTEL_TRACES_SAMPLER: 'always_on' }, sampled],
      [{ OTEL_TRACES_SAMPLER: ' Parentbased_Always_Off ' }, dropped],
      [{ OTEL_TRACES_SAMPLER: 'always_off' }, dropped],
      [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' }, sampled],
      [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio' }, sampled],
    ] as const) {
      assert.equal(decide(env, 0.999, remoteNot), decision, `${JSON.stringify(env)}, caller not sampled`);
      assert.equal(decide(env, 0.999, remoteSampled), decision, `${JSON.stringify(env)}, caller sampled`);
      assert.equal(decide(env, 0.999), decision, `${JSON.stringify(env)}, no caller`);
    }
    const zero = { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' };
    assert.equal(decide(zero, 0, remoteSampled), dropped);
  });

  test('when the sampler is described (as the SDK logs it), then it names each sampler it delegates to, at the ratio it uses', () => {
    const described = (env: Record<string, string>) => samplerFrom(env, () => 0.5).toString();
    const local = 'localParentSampled=AlwaysOnSampler, localParentNotSampled=AlwaysOffSampler';
    const ratio = (root: string, remote: string) =>
      `ParentBased{root=TraceIdRatioBased{${root}}, remoteParentSampled=RandomRatioSampler{${remote}}, remoteParentNotSampled=RandomRatioSampler{${remote}}, ${local}}`;
    assert.equal(described(half), ratio('0.5', '0.5'));
    assert.equal(described({ ...half, OTEL_TRACES_SAMPLER: 'traceidratio' }), ratio('0.5', '0.5'));
    for (const arg of ['2', '-0.5', ' ', 'half']) {
      assert.equal(described({ ...half, OTEL_TRACES_SAMPLER_ARG: arg }), ratio('1', '1'), `ratio "${arg}"`);
    }
    assert.equal(described({ ...half, OTEL_TRACES_SAMPLER_ARG: ' 0.25 ' }), ratio('0.25', '0.25'));
    assert.equal(described({ ...half, OTEL_TRACES_SAMPLER_ARG: '0' }), ratio('0', '0'));
    for (const env of [
      {},
      { OTEL_TRACES_SAMPLER: 'always_on' },
      { OTEL_TRACES_SAMPLER: 'nonsense' },
    ] as Record<string, string>[]) {
      assert.equal(
        described(env),
        `ParentBased{root=AlwaysOnSampler, remoteParentSampled=AlwaysOnSampler, remoteParentNotSampled=AlwaysOnSampler, ${local}}`,
        JSON.stringify(env),
      );
    }
    assert.equal(
      described({ OTEL_TRACES_SAMPLER: 'always_off' }),
      `ParentBased{root=AlwaysOffSampler, remoteParentSampled=AlwaysOffSampler, remoteParentNotSampled=AlwaysOffSampler, ${local}}`,
    );
  });

  test('when the ratio is negative or blank, then it is 1, as the SDK takes it: a caller not sampled is still kept', () => {
    for (const arg of ['-0.5', ' ']) {
      assert.equal(
        decide({ ...half, OTEL_TRACES_SAMPLER_ARG: arg }, 0.999, remoteNot),
        sampled,
        `ratio "${arg}"`,
      );
    }
  });

  test('when the length variables are read, then the span one first, then the general one, each only as a positive whole number', () => {
    assert.equal(attributeValueLengthLimit({}), 2048);
    assert.equal(attributeValueLengthLimit({ OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: ' 300 ' }), 300);
    assert.equal(attributeValueLengthLimit({ OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: '0' }), 2048, 'not no bound');
    assert.equal(attributeValueLengthLimit({ OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: '-1' }), 2048);
    assert.equal(attributeValueLengthLimit({ OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: '1.5' }), 2048);
    assert.equal(
      attributeValueLengthLimit({
        OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT: 'x',
        OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: '7',
      }),
      7,
    );
  });
});

describe('a server span’s status', () => {
  test('when the answer is a 4xx, then the status stays unset; when it is a 5xx, then it is an error', async () => {
    const tracing = tracingWith({});
    const app = await appWith(tracing);
    const answers = new Map<string, number>();
    for (const url of [
      '/v1/pets/7',
      '/no/such/path',
      '/invalid',
      '/unauthorized',
      '/unavailable',
      '/broken',
    ]) {
      const answer = await app.inject({ url });
      answers.set(traceresponse(answer.headers).traceId, answer.statusCode);
    }
    await app.close();
    await tracing.shutdown();
    const got = [...answers].map(([traceId, status]) => {
      const [span] = spansOf(traceId);
      return [status, span?.attributes['http.response.status_code'], span?.status];
    });
    assert.deepEqual(got, [
      [200, 200, UNSET],
      [404, 404, UNSET],
      [400, 400, UNSET],
      [401, 401, UNSET],
      [503, 503, ERROR],
      [500, 500, ERROR],
    ]);
  });
});

describe('a delivery attempt’s span', () => {
  const delivery = (url: string): ClaimedDelivery => ({
    endpointId: 4n,
    eventId: 9n,
    attempts: 2,
    trigger: 'schedule',
    url,
    secrets: ['whsec_x'],
    body: '{}',
    eventType: 'pet.created',
    cause: undefined,
    occurredAt: new Date(),
    leaseUntil: new Date(),
  });

  test('when an endpoint’s URL carries a query and a fragment, then url.full leaves them out; a 4xx or 5xx answer, or none, is an error', async () => {
    const tracing = tracingWith({});
    const sent: Record<string, string>[] = [];
    const results = [
      { answered: true, status: 204, body: '' },
      { answered: true, status: 410, body: 'gone' },
      { answered: false, error: 'connection refused' },
    ] as const;
    for (const [n, result] of results.entries()) {
      await tracing.deliveries.attempt(
        delivery(`https://hooks.example.com:8443/in/${n}?token=secret#frag`),
        async (headers) => {
          sent.push(headers);
          return result;
        },
      );
    }
    await tracing.shutdown();
    const traceIds = sent.map((headers) => /^00-([0-9a-f]{32})-/.exec(headers.traceparent ?? '')?.[1] ?? '');
    const got = traceIds.map((traceId) => {
      const [span] = spansOf(traceId);
      return {
        url: span?.attributes['url.full'],
        port: span?.attributes['server.port'],
        attempt: span?.attributes['petstore.webhook.attempt'],
        status: span?.status,
      };
    });
    assert.deepEqual(got, [
      { url: 'https://hooks.example.com:8443/in/0', port: 8443, attempt: 3, status: UNSET },
      { url: 'https://hooks.example.com:8443/in/1', port: 8443, attempt: 3, status: ERROR },
      { url: 'https://hooks.example.com:8443/in/2', port: 8443, attempt: 3, status: ERROR },
    ]);
    assert.ok(
      otlp.spans.every((span) => !JSON.stringify(span.attributes).includes('secret')),
      'no span carries the token',
    );
  });

  /** Attempts `claimed`, the receiver's side giving `result`: what the attempt returned, and the headers sent. */
  async function attempted(
    tracing: Tracing,
    claimed: ClaimedDelivery,
    result: SendResult,
  ): Promise<{ returned: SendResult; headers: Record<string, string> }> {
    let headers: Record<string, string> = {};
    const returned = await tracing.deliveries.attempt(claimed, async (sent) => {
      headers = sent;
      return result;
    });
    return { returned, headers };
  }

  test('when an attempt is made, then its span is a client span named POST with the endpoint, event and attempt, and its traceparent goes to the receiver', async () => {
    const tracing = tracingWith({});
    const claimed = {
      ...delivery('https://hooks.example.com/in'),
      endpointId: 12n,
      eventId: 340n,
      attempts: 0,
    };
    const answer = { answered: true, status: 200, body: 'ok' } as const;
    const { returned, headers } = await attempted(tracing, claimed, answer);
    await tracing.shutdown();
    assert.equal(returned, answer, 'the result is handed on as it was');
    assert.deepEqual(Object.keys(headers), ['traceparent']);
    const { traceId, spanId } = traceresponse({ traceresponse: headers.traceparent });
    const [span] = spansOf(traceId);
    assert.deepEqual(
      {
        spanId: span?.spanId,
        parent: span?.parentSpanId,
        name: span?.name,
        kind: span?.kind,
        attributes: span?.attributes,
        links: span?.links,
        status: [span?.status, span?.statusMessage],
      },
      {
        spanId,
        parent: undefined,
        name: 'POST',
        kind: 3,
        attributes: {
          'http.request.method': 'POST',
          'url.full': 'https://hooks.example.com/in',
          'server.address': 'hooks.example.com',
          'server.port': 443,
          'petstore.webhook.endpoint_id': '12',
          'petstore.event.id': '340',
          'petstore.event.type': 'pet.created',
          'petstore.webhook.attempt': 1,
          'http.response.status_code': 200,
        },
        links: [],
        status: [UNSET, ''],
      },
    );
    assert.equal(headers.traceparent, `00-${traceId}-${spanId}-01`);
  });

  test('when an endpoint’s URL names no port, then the scheme’s is given: 80 for http, 443 for https', async () => {
    const tracing = tracingWith({});
    const sent: string[] = [];
    for (const url of [
      'http://hooks.example.com/in',
      'https://hooks.example.com/in',
      'http://10.0.0.5:8080/in',
    ]) {
      const { headers } = await attempted(tracing, delivery(url), { answered: true, status: 204, body: '' });
      sent.push(headers.traceparent ?? '');
    }
    await tracing.shutdown();
    const exported = sent.map((traceparent) => {
      const [span] = spansOf(traceresponse({ traceresponse: traceparent }).traceId);
      return [span?.attributes['server.address'], span?.attributes['server.port']];
    });
    assert.deepEqual(exported, [
      ['hooks.example.com', 80],
      ['hooks.example.com', 443],
      ['10.0.0.5', 8080],
    ]);
  });

  test('when the event has a cause, then the attempt’s span is linked to it, yet at the root of a trace of its own even inside another span; a cause that is no traceparent gives no link', async () => {
    const tracing = tracingWith({});
    const causeTrace = newTraceId();
    const sent: string[] = [];
    const within = tracing.tracer.startSpan('the deliverer’s loop');
    for (const cause of [`00-${causeTrace}-${CALLER_SPAN}-01`, 'not a traceparent']) {
      const { headers } = await context.with(trace.setSpan(ROOT_CONTEXT, within), () =>
        attempted(
          tracing,
          { ...delivery('https://hooks.example.com/in'), cause },
          {
            answered: true,
            status: 204,
            body: '',
          },
        ),
      );
      sent.push(headers.traceparent ?? '');
    }
    within.end();
    await tracing.shutdown();
    const exported = sent.map((traceparent) => {
      const [span] = spansOf(traceresponse({ traceresponse: traceparent }).traceId);
      return { traceId: span?.traceId, parent: span?.parentSpanId, links: span?.links };
    });
    const own = sent.map((traceparent) => traceresponse({ traceresponse: traceparent }).traceId);
    assert.notEqual(own[0], within.spanContext().traceId);
    assert.notEqual(own[1], within.spanContext().traceId);
    assert.deepEqual(exported, [
      {
        traceId: own[0],
        parent: undefined,
        links: [{ traceId: causeTrace, spanId: CALLER_SPAN, attributes: { 'petstore.link': 'caused by' } }],
      },
      { traceId: own[1], parent: undefined, links: [] },
    ]);
  });

  test('when the receiver answers 399, then the status stays unset; from 400 it is an error named by the status; with no answer, by the error', async () => {
    const tracing = tracingWith({});
    const sent: string[] = [];
    for (const result of [
      { answered: true, status: 399, body: '' },
      { answered: true, status: 400, body: '' },
      { answered: true, status: 502, body: '' },
      { answered: false, error: 'timed out after 10000 ms' },
    ] as const) {
      const { headers } = await attempted(tracing, delivery('https://hooks.example.com/in'), result);
      sent.push(headers.traceparent ?? '');
    }
    await tracing.shutdown();
    const exported = sent.map((traceparent) => {
      const [span] = spansOf(traceresponse({ traceresponse: traceparent }).traceId);
      return [span?.attributes['http.response.status_code'], span?.status, span?.statusMessage];
    });
    assert.deepEqual(exported, [
      [399, UNSET, ''],
      [400, ERROR, '400'],
      [502, ERROR, '502'],
      [undefined, ERROR, 'timed out after 10000 ms'],
    ]);
  });

  test('when sending throws, then the attempt rejects with its error and its span is ended all the same', async () => {
    const tracing = tracingWith({});
    let traceparent = '';
    await assert.rejects(
      tracing.deliveries.attempt(delivery('https://hooks.example.com/in'), async (headers) => {
        traceparent = headers.traceparent ?? '';
        throw new Error('socket hang up');
      }),
      { message: 'socket hang up' },
    );
    await tracing.shutdown();
    assert.deepEqual(
      spansOf(traceresponse({ traceresponse: traceparent }).traceId).map((span) => [span.name, span.status]),
      [['POST', UNSET]],
    );
  });
});

describe('what tracing names itself, and the cause it gives a change', () => {
  test('when tracing starts, then its spans come from the service animal-store at this version and its tracer of the same name; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES take precedence', async () => {
    const resourceOf = async (env: Record<string, string>) => {
      const tracing = tracingWith(env);
      const span = tracing.tracer.startSpan('named');
      span.end();
      await tracing.shutdown();
      const [exported] = spansOf(span.spanContext().traceId);
      return { resource: exported?.resource, scope: exported?.scope };
    };
    const own = await resourceOf({});
    assert.deepEqual(
      [own.resource?.['service.name'], own.resource?.['service.version'], own.scope],
      ['animal-store', VERSION, { name: 'animal-store', version: VERSION }],
    );
    const named = await resourceOf({
      OTEL_SERVICE_NAME: 'animal-store-eu',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=staging,service.version=9.9.9',
    });
    assert.deepEqual(
      [
        named.resource?.['service.name'],
        named.resource?.['service.version'],
        named.resource?.['deployment.environment.name'],
      ],
      ['animal-store-eu', '9.9.9', 'staging'],
    );
  });

  test('when a change is made in a recorded span, then its cause is that span’s traceparent; outside any span, or in a span the sampler left out, it has none', async () => {
    const on = tracingWith({});
    assert.equal(eventCause(), undefined, 'outside any span');
    const recorded = on.tracer.startActiveSpan('change', (span) => {
      const cause = eventCause();
      span.end();
      return { cause, ids: span.spanContext() };
    });
    assert.equal(recorded.cause, `00-${recorded.ids.traceId}-${recorded.ids.spanId}-01`);
    const caller = trace.setSpanContext(ROOT_CONTEXT, {
      traceId: newTraceId(),
      spanId: CALLER_SPAN,
      traceFlags: TraceFlags.NONE,
      isRemote: true,
    });
    assert.equal(
      context.with(caller, () => eventCause()),
      undefined,
      'a caller’s span not sampled is not recorded here',
    );
    await on.shutdown();
    const off = tracingWith({ OTEL_TRACES_SAMPLER: 'always_off' });
    const dropped = off.tracer.startActiveSpan('change', (span) => {
      const seen = { cause: eventCause(), recording: span.isRecording() };
      span.end();
      return seen;
    });
    assert.deepEqual(dropped, { cause: undefined, recording: false });
    await off.shutdown();
  });
});

describe('a stop while the collector is away', () => {
  test('when the collector does not answer, then the stop gives up at SHUTDOWN_EXPORT_MS (2 s, on a mocked clock), not a moment before, and says so; the span goes once it answers', async (t) => {
    const tracing = tracingWith({});
    const held = tracing.tracer.startSpan('held by the collector');
    held.end();
    const release = otlp.hold();
    t.mock.timers.enable({ apis: ['setTimeout'] });
    try {
      let outcome: string | undefined;
      const stopped = tracing.shutdown().then(
        () => {
          outcome = 'exported';
        },
        (error: Error) => {
          outcome = error.message;
        },
      );
      const turn = () => new Promise((resolve) => setImmediate(resolve));
      await turn();
      t.mock.timers.tick(SHUTDOWN_EXPORT_MS - 1);
      await turn();
      assert.equal(outcome, undefined, 'still waiting for the collector');
      t.mock.timers.tick(1);
      await stopped;
      assert.equal(SHUTDOWN_EXPORT_MS, 2_000);
      assert.equal(outcome, 'the last spans were not exported within 2000 ms');
    } finally {
      t.mock.timers.reset();
      release();
    }
    // Once the collector answers, the stop under way ends, and the span was exported after all.
    await tracing.shutdown();
    assert.deepEqual(
      spansOf(held.spanContext().traceId).map((span) => span.name),
      ['held by the collector'],
    );
  });
});

describe('a server span’s name and attributes', () => {
  /** A small app like appWith's, with routes that have an operation id and an API key. */
  async function namedApp(tracing: Tracing, seen: (string | undefined)[] = []): Promise<FastifyInstance> {
    const app = Fastify();
    app.decorateRequest('apiKeyId', '');
    await app.register(tracing.serverSpans, { tracer: tracing.tracer });
    const activeSpan = () => trace.getSpan(context.active())?.spanContext().spanId;
    app.get('/v1/pets/:petId', { schema: { operationId: 'showPetById' } }, async () => {
      seen.push(activeSpan());
      return { id: 1 };
    });
    app.get('/v1/stores/:store_id/orders/:orderId', async (request) => {
      (request as unknown as { apiKeyId: string }).apiKeyId = 'key-42';
      seen.push(activeSpan());
      return [];
    });
    await app.ready();
    return app;
  }

  test('when a request reaches a route, then its span is named by method and route template, with the route and the request’s attributes; an unknown address is named by its method alone, with no route', async () => {
    const tracing = tracingWith({});
    const app = await namedApp(tracing);
    const known = await app.inject({ url: '/v1/pets/7?fields=name', headers: { 'user-agent': 'curl/8.5' } });
    // An empty User-Agent is left out (inject sends its own when none is given).
    const nested = await app.inject({ url: '/v1/stores/3/orders/9', headers: { 'user-agent': '' } });
    const missing = await app.inject({
      method: 'DELETE',
      url: '/no/such/path?x=1',
      headers: { 'user-agent': '' },
    });
    assert.deepEqual([known.statusCode, nested.statusCode, missing.statusCode], [200, 200, 404]);
    await app.close();
    await tracing.shutdown();
    const exported = [known, nested, missing].map((answer) => {
      const [span] = spansOf(traceresponse(answer.headers).traceId);
      return { name: span?.name, kind: span?.kind, attributes: span?.attributes };
    });
    const request = {
      'url.scheme': 'http',
      'client.address': '127.0.0.1',
      'network.protocol.version': '1.1',
    };
    assert.deepEqual(exported, [
      {
        name: 'GET /v1/pets/{petId}',
        kind: 2,
        attributes: {
          'http.request.method': 'GET',
          'url.path': '/v1/pets/7',
          'http.route': '/v1/pets/{petId}',
          ...request,
          'user_agent.original': 'curl/8.5',
          'http.response.status_code': 200,
          'petstore.operation_id': 'showPetById',
        },
      },
      {
        name: 'GET /v1/stores/{store_id}/orders/{orderId}',
        kind: 2,
        attributes: {
          'http.request.method': 'GET',
          'url.path': '/v1/stores/3/orders/9',
          'http.route': '/v1/stores/{store_id}/orders/{orderId}',
          ...request,
          'http.response.status_code': 200,
          'petstore.api_key.id': 'key-42',
        },
      },
      {
        name: 'DELETE',
        kind: 2,
        attributes: {
          'http.request.method': 'DELETE',
          'url.path': '/no/such/path',
          ...request,
          'http.response.status_code': 404,
        },
      },
    ]);
  });

  test('when a request is recorded, then its handler runs in its span’s context; when the sampler leaves it out, then in none', async () => {
    for (const [env, entered] of [
      [{}, true],
      [{ OTEL_TRACES_SAMPLER: 'always_off' }, false],
    ] as const) {
      const tracing = tracingWith(env);
      const seen: (string | undefined)[] = [];
      const app = await namedApp(tracing, seen);
      const alone = await app.inject({ url: '/v1/pets/7' });
      const continued = await app.inject({
        url: '/v1/pets/8',
        headers: { traceparent: `00-${newTraceId()}-${CALLER_SPAN}-01` },
      });
      await app.close();
      await tracing.shutdown();
      const spanIds = [alone, continued].map((answer) => traceresponse(answer.headers).spanId);
      assert.deepEqual(seen, entered ? spanIds : [undefined, undefined], JSON.stringify(env));
    }
  });

  test('when the sampler leaves a request out, then its span is given only what the sampler sees at its start, and ended; a recorded one is given the rest, and no route or operation id it has not got', async () => {
    for (const recording of [false, true]) {
      const calls: unknown[][] = [];
      const span = {
        spanContext: () => ({
          traceId: 'a'.repeat(32),
          spanId: 'b'.repeat(16),
          traceFlags: recording ? 1 : 0,
        }),
        isRecording: () => recording,
        setAttributes: (attributes: unknown) => calls.push(['setAttributes', attributes]),
        setAttribute: (key: string, value: unknown) => calls.push(['setAttribute', key, value]),
        setStatus: (status: unknown) => calls.push(['setStatus', status]),
        end: () => calls.push(['end']),
      };
      const tracer = {
        startSpan: (name: string, options: unknown) => {
          calls.push(['startSpan', name, options]);
          return span;
        },
      } as unknown as Tracer;
      const app = Fastify();
      await app.register(serverSpans, { tracer });
      app.get('/unavailable', { schema: { operationId: 'down' } }, async (_request, reply) =>
        reply.code(503).send(),
      );
      const answer = await app.inject({ url: '/unavailable', headers: { 'user-agent': 'probe' } });
      await app.close();
      assert.equal(
        answer.headers.traceresponse,
        `00-${'a'.repeat(32)}-${'b'.repeat(16)}-0${recording ? 1 : 0}`,
      );
      const started = [
        'startSpan',
        'GET /unavailable',
        {
          kind: SpanKind.SERVER,
          attributes: {
            'http.request.method': 'GET',
            'url.path': '/unavailable',
            'http.route': '/unavailable',
          },
        },
      ];
      assert.deepEqual(
        calls,
        recording
          ? [
              started,
              [
                'setAttributes',
                {
                  'url.scheme': 'http',
                  'client.address': '127.0.0.1',
                  'network.protocol.version': '1.1',
                  'user_agent.original': 'probe',
                },
              ],
              ['setAttribute', 'http.response.status_code', 503],
              ['setAttribute', 'petstore.operation_id', 'down'],
              ['setStatus', { code: SpanStatusCode.ERROR, message: '503' }],
              ['end'],
            ]
          : [started, ['end']],
        `recording: ${recording}`,
      );
      // An unknown address: no route among the attributes a sampler sees, and no operation id given.
      calls.length = 0;
      const app404 = Fastify();
      await app404.register(serverSpans, { tracer });
      const missing = await app404.inject({ method: 'POST', url: '/nowhere', headers: { 'user-agent': '' } });
      await app404.close();
      assert.equal(missing.statusCode, 404);
      const startedMissing = [
        'startSpan',
        'POST',
        { kind: SpanKind.SERVER, attributes: { 'http.request.method': 'POST', 'url.path': '/nowhere' } },
      ];
      assert.deepEqual(
        calls,
        recording
          ? [
              startedMissing,
              [
                'setAttributes',
                { 'url.scheme': 'http', 'client.address': '127.0.0.1', 'network.protocol.version': '1.1' },
              ],
              ['setAttribute', 'http.response.status_code', 404],
              ['end'],
            ]
          : [startedMissing, ['end']],
        `recording: ${recording}, unknown address`,
      );
    }
  });

  test('when a hook before the plugin’s answers a request first, then it has no span and its answer completes without error', async () => {
    const tracing = tracingWith({});
    const logged: { level: number; msg: string }[] = [];
    const app = Fastify({
      logger: { level: 'info', stream: { write: (line: string) => logged.push(JSON.parse(line)) } },
    });
    app.addHook('onRequest', (_request, reply, done) => {
      reply.code(429).send({ code: 'rate_limited' });
      done();
    });
    await app.register(tracing.serverSpans, { tracer: tracing.tracer });
    app.get('/v1/pets/:petId', async () => ({ id: 1 }));
    const answer = await app.inject({ url: '/v1/pets/7' });
    await app.close();
    await tracing.shutdown();
    assert.deepEqual([answer.statusCode, answer.headers.traceresponse], [429, undefined]);
    assert.deepEqual(
      logged.filter((line) => line.msg.startsWith('request')).map((line) => [line.level, line.msg]),
      [[30, 'request completed']],
    );
  });

  test('when the plugin is registered, then it is known by its name to the plugins after it, and it refuses a Fastify other than 5.x', async () => {
    const tracing = tracingWith({});
    const app = Fastify();
    await app.register(tracing.serverSpans, { tracer: tracing.tracer });
    assert.equal(await registersAfter(app, 'server-spans'), true);
    await app.close();
    const older = Fastify();
    older.register(async (child) => {
      Object.defineProperty(child, 'version', { value: '4.28.1' });
      child.register(tracing.serverSpans, { tracer: tracing.tracer });
    });
    await assert.rejects(async () => older.ready(), {
      code: 'FST_ERR_PLUGIN_VERSION_MISMATCH',
      message: "fastify-plugin: server-spans - expected '5.x' fastify version, '4.28.1' is installed",
    });
    await tracing.shutdown();
  });
});

describe('storage spans', () => {
  /** The span active where it is called, if any. */
  const activeSpan = () => trace.getSpan(context.active());

  test('when storage is called inside a recorded request, then the call is a client span, its child, with the database and operation; outside any span, or in one the sampler left out, it makes none', async () => {
    const tracing = tracingWith({});
    const request = tracing.tracer.startSpan('GET /v1/pets');
    const inside: unknown[] = [];
    const result = context.with(trace.setSpan(ROOT_CONTEXT, request), () =>
      tracing.storage.around('pets.list', () => {
        inside.push(activeSpan()?.spanContext().spanId);
        return 'listed';
      }),
    );
    request.end();
    assert.equal(result, 'listed');
    const outside = tracing.storage.around('events.prune', () => activeSpan());
    const unsampled = trace.wrapSpanContext({
      traceId: newTraceId(),
      spanId: CALLER_SPAN,
      traceFlags: TraceFlags.SAMPLED,
    });
    const sampledOut = context.with(trace.setSpan(ROOT_CONTEXT, unsampled), () =>
      tracing.storage.around('pets.get', () => activeSpan()),
    );
    await tracing.shutdown();
    assert.equal(outside, undefined, 'outside any span, run as it is');
    assert.equal(sampledOut, unsampled, 'in a span not recorded, run in it as it is');
    const { traceId, spanId } = request.spanContext();
    const spans = spansOf(traceId).filter((span) => span.name !== 'GET /v1/pets');
    assert.deepEqual(
      spans.map((span) => ({
        spanId: span.spanId,
        parent: span.parentSpanId,
        name: span.name,
        kind: span.kind,
        attributes: span.attributes,
        status: span.status,
      })),
      [
        {
          spanId: inside[0],
          parent: spanId,
          name: 'pets.list',
          kind: 3,
          attributes: { 'db.system.name': 'sqlite', 'db.operation.name': 'pets.list' },
          status: UNSET,
        },
      ],
    );
    assert.deepEqual(
      otlp.spans.filter((span) => span.name === 'events.prune' || span.name === 'pets.get'),
      [],
    );
  });

  test('when a storage call returns a promise, then its span ends once it settles, an error marking it with its message; a call that throws is marked and rethrown', async () => {
    const tracing = tracingWith({});
    const request = tracing.tracer.startSpan('POST /v1/pets');
    const inRequest = <R>(run: () => R): R => context.with(trace.setSpan(ROOT_CONTEXT, request), run);
    const spans: Span[] = [];
    let finish: (value: string) => void = () => {};
    let fail: (error: Error) => void = () => {};
    const resolved = inRequest(() =>
      tracing.storage.around('pets.create', () => {
        spans.push(activeSpan() as Span);
        return new Promise<string>((resolve) => {
          finish = resolve;
        });
      }),
    );
    const rejected = inRequest(() =>
      tracing.storage.around('orders.place', () => {
        spans.push(activeSpan() as Span);
        return new Promise<string>((_, reject) => {
          fail = reject;
        });
      }),
    );
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(
      spans.map((span) => span.isRecording()),
      [true, true],
      'not ended while the call is under way',
    );
    finish('created');
    fail(new Error('duplicate key'));
    assert.equal(await resolved, 'created');
    await assert.rejects(rejected, { message: 'duplicate key' });
    assert.deepEqual(
      spans.map((span) => span.isRecording()),
      [false, false],
      'ended once settled',
    );
    assert.throws(
      () =>
        inRequest(() =>
          tracing.storage.around('pets.delete', () => {
            throw new Error('database is locked');
          }),
        ),
      { message: 'database is locked' },
    );
    const returned = inRequest(() => tracing.storage.around('pets.count', () => 3));
    assert.equal(returned, 3);
    request.end();
    await tracing.shutdown();
    assert.deepEqual(
      spansOf(request.spanContext().traceId)
        .filter((span) => span.parentSpanId === request.spanContext().spanId)
        .map((span) => [span.name, span.status, span.statusMessage])
        .sort(),
      [
        ['orders.place', ERROR, 'duplicate key'],
        ['pets.count', UNSET, ''],
        ['pets.create', UNSET, ''],
        ['pets.delete', ERROR, 'database is locked'],
      ],
    );
  });

  test('when the writes of several requests share a group commit, then the commit is a span of its own, a child of the first traced write’s request, linked to the others’, naming how many writes it carried', async () => {
    const tracing = tracingWith({});
    const first = tracing.tracer.startSpan('POST /v1/pets');
    const second = tracing.tracer.startSpan('POST /v1/pets');
    const inCommit: (Span | undefined)[] = [];
    const batcher = new CreateBatcher<string, string>(
      (items) => {
        inCommit.push(activeSpan());
        return items.map((item) => `${item}!`);
      },
      { name: 'pets.create' },
    );
    const added = [
      batcher.add('untraced'),
      context.with(trace.setSpan(ROOT_CONTEXT, first), () => batcher.add('first')),
      context.with(trace.setSpan(ROOT_CONTEXT, second), () => batcher.add('second')),
    ];
    assert.deepEqual(await Promise.all(added), ['untraced!', 'first!', 'second!']);
    const untraced = new CreateBatcher<string, string>(
      (items) => {
        inCommit.push(activeSpan());
        return items;
      },
      { name: 'deliveries.result' },
    );
    assert.equal(await untraced.add('alone'), 'alone');
    first.end();
    second.end();
    await tracing.shutdown();
    const commits = otlp.spans.filter((span) => span.name.startsWith('group commit'));
    const exported = commits.find((span) => span.traceId === first.spanContext().traceId);
    assert.deepEqual(
      {
        name: exported?.name,
        kind: exported?.kind,
        parent: exported?.parentSpanId,
        links: exported?.links,
        attributes: exported?.attributes,
        status: exported?.status,
      },
      {
        name: 'group commit pets.create',
        kind: 3,
        parent: first.spanContext().spanId,
        links: [
          { traceId: second.spanContext().traceId, spanId: second.spanContext().spanId, attributes: {} },
        ],
        attributes: {
          'db.system.name': 'sqlite',
          'db.operation.name': 'group commit',
          'db.operation.batch.size': 3,
        },
        status: UNSET,
      },
    );
    assert.deepEqual(
      inCommit.map((span) => span?.spanContext().spanId),
      [exported?.spanId, undefined],
      'the commit runs in its span; a commit of no traced request in none',
    );
    assert.deepEqual(
      commits.filter((span) => span.name === 'group commit deliveries.result'),
      [],
    );
  });

  test('when a group commit fails, then its span is an error with the failure’s message; on PostgreSQL its spans name postgresql', async () => {
    const tracing = tracingWith({});
    const storage = new StorageSpans(tracing.tracer, 'postgresql');
    const request = tracing.tracer.startSpan('POST /v1/orders');
    const caller = context.with(trace.setSpan(ROOT_CONTEXT, request), () => storage.caller());
    assert.deepEqual(caller, request.spanContext());
    await assert.rejects(
      storage.commit('orders.place', [caller], async () => {
        throw new Error('could not serialize access');
      }),
      { message: 'could not serialize access' },
    );
    assert.throws(
      () =>
        storage.commit('orders.place', [caller], () => {
          throw new Error('connection terminated');
        }),
      { message: 'connection terminated' },
    );
    assert.equal(
      storage.commit('pets.create', [caller], () => 'done'),
      'done',
    );
    const notRecorded = trace.wrapSpanContext({ traceId: newTraceId(), spanId: CALLER_SPAN, traceFlags: 1 });
    assert.deepEqual(
      [storage.caller(), context.with(trace.setSpan(ROOT_CONTEXT, notRecorded), () => storage.caller())],
      [undefined, undefined],
      'outside any span, or in one not recorded, no caller',
    );
    const around = context.with(trace.setSpan(ROOT_CONTEXT, request), () =>
      storage.around('orders.get', () => activeSpan()?.spanContext().spanId),
    );
    request.end();
    await tracing.shutdown();
    assert.deepEqual(
      spansOf(request.spanContext().traceId)
        .filter((span) => span.parentSpanId === request.spanContext().spanId)
        .map((span) => [
          span.name,
          span.attributes['db.system.name'],
          span.attributes['db.operation.batch.size'],
          span.status,
          span.statusMessage,
        ])
        .sort(),
      [
        ['group commit orders.place', 'postgresql', 1, ERROR, 'connection terminated'],
        ['group commit orders.place', 'postgresql', 1, ERROR, 'could not serialize access'],
        ['group commit pets.create', 'postgresql', 1, UNSET, ''],
        ['orders.get', 'postgresql', undefined, UNSET, ''],
      ],
    );
    assert.deepEqual(
      spansOf(request.spanContext().traceId)
        .filter((span) => span.name === 'orders.get')
        .map((span) => span.spanId),
      [around],
      'the call runs in its span',
    );
  });
});
