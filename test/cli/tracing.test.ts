import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, backends, before, describe, type TestDatabase, test } from '../support/backends.js';
import {
  jsonLines,
  killAllCliProcesses,
  type ServeProcess,
  startServe,
  type TempDatabase,
  tempDatabase,
} from '../support/cli.js';
import { queryDatabase } from '../support/db-inspect.js';
import { freePort } from '../support/free-port.js';
import { OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { TEST_KEY } from '../support/test-server.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

after(killAllCliProcesses);

/** Preloaded into the service: on exit it says how many OpenTelemetry SDK modules it had loaded. */
const REPORT_MODULES = `--require ${fileURLToPath(new URL('../support/report-otel-modules.cjs', import.meta.url))}`;
const modulesLoaded = (stderr: string) =>
  Number(/^opentelemetry sdk modules loaded: (\d+)$/m.exec(stderr)?.[1] ?? Number.NaN);

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/;
const SERVER = 2;
const CLIENT = 3;

interface Answer {
  status: number;
  headers: Headers;
  body: string;
}

async function call(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${TEST_KEY}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, headers: res.headers, body: await res.text() } satisfies Answer;
}

/** The trace id and span id an answer's `traceresponse` names. */
function traceOf(answer: Answer): { traceId: string; spanId: string } {
  const match = TRACEPARENT.exec(answer.headers.get('traceresponse') ?? '');
  assert.ok(match, `traceresponse: ${answer.headers.get('traceresponse')}`);
  return { traceId: match[1] as string, spanId: match[2] as string };
}

/** A span in words: name, kind, parent and attributes, as the report describes a trace. */
function describeSpan(span: ReceivedSpan, indent = ''): string {
  const kind = { 1: 'internal', 2: 'server', 3: 'client' }[span.kind] ?? String(span.kind);
  const links = span.links.map((link) => ` linked to trace ${link.traceId} span ${link.spanId}`).join('');
  return `${indent}${span.name} [${kind}] trace ${span.traceId} span ${span.spanId}${span.parentSpanId ? ` parent ${span.parentSpanId}` : ' (root)'}${links} ${JSON.stringify(span.attributes)}`;
}

for (const backend of backends) {
  backend.describe(`traces exported over OTLP/HTTP from petstore serve (${backend.name})`, () => {
    let database: TestDatabase;
    let otlp: OtlpReceiver;
    let hooks: WebhookReceiver;
    let serve: ServeProcess;

    before(async () => {
      otlp = await OtlpReceiver.start();
      hooks = await WebhookReceiver.start();
      database = await backend.create();
      serve = await startServe({
        DATABASE_URL: database.url,
        PETSTORE_API_KEYS: TEST_KEY,
        RATE_LIMIT_PER_SECOND: '0',
        WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint,
        OTEL_BSP_SCHEDULE_DELAY: '50',
        // Named on one backend; the other shows the default name.
        ...(backend.name === 'sqlite' ? { OTEL_SERVICE_NAME: 'petstore-under-test' } : {}),
        NODE_OPTIONS: REPORT_MODULES,
      });
    });
    after(async () => {
      await serve?.kill();
      await hooks?.close();
      await otlp?.close();
      await database?.drop();
    });

    test('when a pet is created, then one trace holds the server span POST /v1/pets and its database span, and the answer and the request line carry the trace id', async () => {
      const created = await call(serve.url, 'POST', '/v1/pets', { name: 'Traced', categoryId: 7 });
      assert.equal(created.status, 201, created.body);
      const { traceId, spanId } = traceOf(created);
      const system = backend.name === 'sqlite' ? 'sqlite' : 'postgresql';
      const [server, storage, commit] = await otlp.waitFor('the spans of the create', (spans) => {
        const server = spans.find((span) => span.spanId === spanId);
        const storage = spans.find((span) => span.parentSpanId === spanId && span.name === 'pets.create');
        const commit = spans.find((span) => storage && span.parentSpanId === storage.spanId);
        return server && storage && commit ? [server, storage, commit] : undefined;
      });
      assert.deepEqual(
        {
          name: server.name,
          kind: server.kind,
          traceId: server.traceId,
          parent: server.parentSpanId,
          service: server.service,
        },
        {
          name: 'POST /v1/pets',
          kind: SERVER,
          traceId,
          parent: undefined,
          service: backend.name === 'sqlite' ? 'petstore-under-test' : 'animal-store',
        },
      );
      assert.deepEqual(
        {
          method: server.attributes['http.request.method'],
          route: server.attributes['http.route'],
          path: server.attributes['url.path'],
          status: server.attributes['http.response.status_code'],
          operation: server.attributes['petstore.operation_id'],
          key: server.attributes['petstore.api_key.id'],
          client: server.attributes['client.address'],
        },
        {
          method: 'POST',
          route: '/v1/pets',
          path: '/v1/pets',
          status: 201,
          operation: 'createPet',
          key: 'env:1',
          client: '127.0.0.1',
        },
      );
      assert.deepEqual(
        { traceId: storage.traceId, kind: storage.kind, attributes: storage.attributes },
        {
          traceId,
          kind: CLIENT,
          attributes: { 'db.system.name': system, 'db.operation.name': 'pets.create' },
        },
      );
      // The group commit the create joined: alone in it, as nothing else was being written.
      assert.deepEqual(
        { name: commit.name, traceId: commit.traceId, kind: commit.kind, attributes: commit.attributes },
        {
          name: 'group commit pets.create',
          traceId,
          kind: CLIENT,
          attributes: {
            'db.system.name': system,
            'db.operation.name': 'group commit',
            'db.operation.batch.size': 1,
          },
        },
      );
      assert.equal(JSON.stringify(otlp.spans).includes(TEST_KEY), false, 'the key is in no span');
      assert.ok(otlp.requests.every((request) => request === 'POST /v1/traces application/json'));
      const line = await serve.waitFor('the request line', () =>
        jsonLines(serve.stdout).find(
          (entry) => entry.msg === 'request' && entry.requestId === created.headers.get('x-request-id'),
        ),
      );
      assert.equal(line.traceId, traceId);
    });

    test('when creates arrive together, then each group commit span names how many writes it carried, a child of the first and linked to the others', async () => {
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          call(serve.url, 'POST', '/v1/pets', { name: `Batch ${i}`, categoryId: i }),
        ),
      );
      const servers = new Set(answers.map((answer) => traceOf(answer).spanId));
      const commits = await otlp.waitFor('every create’s group commit', (spans) => {
        const writes = new Set(
          spans
            .filter((s) => s.name === 'pets.create' && servers.has(s.parentSpanId ?? ''))
            .map((s) => s.spanId),
        );
        if (writes.size < 12) return undefined;
        const commits = spans.filter(
          (s) =>
            s.name === 'group commit pets.create' &&
            (writes.has(s.parentSpanId ?? '') || s.links.some((link) => writes.has(link.spanId))),
        );
        const carried = commits.reduce((sum, s) => sum + Number(s.attributes['db.operation.batch.size']), 0);
        return carried >= 12 ? commits : undefined;
      });
      for (const commit of commits) {
        // One write is its parent, each other one a link: as many as the batch size says.
        assert.equal(commit.links.length + 1, commit.attributes['db.operation.batch.size']);
      }
      assert.equal(
        commits.reduce((sum, s) => sum + Number(s.attributes['db.operation.batch.size']), 0),
        12,
        'each create in exactly one commit',
      );
    });

    test('when a request carries a traceparent, then its server span continues that trace as a child of the caller’s span, named by its route template', async () => {
      const created = await call(serve.url, 'POST', '/v1/pets', { name: 'Followed', categoryId: 8 });
      const { id } = JSON.parse(created.body) as { id: number };
      const callerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
      const callerSpan = '00f067aa0ba902b7';
      const got = await call(serve.url, 'GET', `/v1/pets/${id}`, undefined, {
        traceparent: `00-${callerTrace}-${callerSpan}-01`,
        tracestate: 'vendor=value',
      });
      assert.equal(got.status, 200);
      const { traceId, spanId } = traceOf(got);
      assert.equal(traceId, callerTrace, 'the answer names the caller’s trace');
      const server = await otlp.waitFor('the span of the get', (spans) =>
        spans.find((span) => span.spanId === spanId),
      );
      assert.deepEqual(
        {
          name: server.name,
          traceId: server.traceId,
          parent: server.parentSpanId,
          operation: server.attributes['petstore.operation_id'],
          route: server.attributes['http.route'],
        },
        {
          name: 'GET /v1/pets/{petId}',
          traceId: callerTrace,
          parent: callerSpan,
          operation: 'getPet',
          route: '/v1/pets/{petId}',
        },
      );
      // An error answer carries the trace too.
      const missing = await call(serve.url, 'GET', '/v1/no/such/path');
      assert.equal(missing.status, 404);
      traceOf(missing);
    });

    test('when a traceparent is malformed, then it is ignored: the request is answered and starts a trace of its own', async () => {
      for (const traceparent of [
        'garbage',
        '00-00000000000000000000000000000000-00f067aa0ba902b7-01', // an all-zero trace id is invalid
        `00-${'a'.repeat(32)}-${'b'.repeat(15)}-01`, // a span id one digit short
      ]) {
        const got = await call(serve.url, 'GET', '/v1/pets?limit=1', undefined, { traceparent });
        assert.equal(got.status, 200, `${traceparent}: ${got.body}`);
        const { traceId, spanId } = traceOf(got);
        assert.ok(!traceparent.includes(traceId), `${traceparent} was continued`);
        const server = await otlp.waitFor('the span of the list', (spans) =>
          spans.find((span) => span.spanId === spanId),
        );
        assert.equal(server.parentSpanId, undefined, `${traceparent}: the span is a root`);
      }
    });

    test('when a create causes a webhook delivery, then the delivery is a client span linked to the create’s trace, and the receiver gets its traceparent', async () => {
      const endpoint = await call(serve.url, 'POST', '/v1/webhook-endpoints', { url: hooks.url('/traced') });
      assert.equal(endpoint.status, 201, endpoint.body);
      const created = await call(serve.url, 'POST', '/v1/pets', { name: 'Announced', categoryId: 9 });
      assert.equal(created.status, 201);
      const cause = traceOf(created);
      const [delivery] = await hooks.waitFor(1, '/traced');
      const incoming = TRACEPARENT.exec(String(delivery?.headers.traceparent));
      assert.ok(incoming, `traceparent: ${delivery?.headers.traceparent}`);
      const [, deliveryTrace, deliverySpan] = incoming;
      const span = await otlp.waitFor('the delivery span', (spans) =>
        spans.find((s) => s.spanId === deliverySpan),
      );
      assert.deepEqual(
        {
          name: span.name,
          kind: span.kind,
          traceId: span.traceId,
          parent: span.parentSpanId,
          links: span.links.map(({ traceId, spanId }) => ({ traceId, spanId })),
          method: span.attributes['http.request.method'],
          url: span.attributes['url.full'],
          status: span.attributes['http.response.status_code'],
          event: span.attributes['petstore.event.type'],
          eventId: span.attributes['petstore.event.id'],
          attempt: span.attributes['petstore.webhook.attempt'],
        },
        {
          name: 'POST',
          kind: CLIENT,
          traceId: deliveryTrace,
          parent: undefined,
          links: [cause],
          method: 'POST',
          url: hooks.url('/traced'),
          status: 204,
          event: 'pet.created',
          eventId: String(delivery?.headers['webhook-id']),
          attempt: 1,
        },
      );
      assert.notEqual(deliveryTrace, cause.traceId, 'a trace of its own, linked');
      // The event as served is unchanged: the cause is kept beside it, never in it.
      const event = JSON.parse(delivery?.body ?? '{}');
      assert.deepEqual(Object.keys(event), ['id', 'type', 'occurredAt', 'data']);
      const served = await call(serve.url, 'GET', `/v1/events/${event.id}`);
      assert.equal(served.body, delivery?.body);

      const createSpans = otlp.spans.filter((s) => s.traceId === cause.traceId);
      const described = [
        ...createSpans.map((s) => describeSpan(s, s.parentSpanId ? '  ' : '')),
        describeSpan(span),
      ].join('\n');
      console.log(`one trace, from a create to its webhook delivery (${backend.name}):\n${described}`);
    });

    test('when the service stops, then it had loaded the OpenTelemetry SDK (the check the next suite relies on)', async () => {
      const { code, stderr } = await serve.stop();
      assert.equal(code, 0);
      assert.ok(modulesLoaded(stderr) > 0, stderr);
    });
  });
}

describe('a collector that is not there', () => {
  test('when the OTLP endpoint refuses connections, then requests are answered as usual, and a stop loses the unexported spans with a warning and exits 0', async () => {
    const database = tempDatabase();
    try {
      const serve = await startServe({
        DATABASE_URL: database.url,
        PETSTORE_API_KEYS: TEST_KEY,
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}`, // nothing listens there
        OTEL_BSP_SCHEDULE_DELAY: '50',
      });
      try {
        for (let i = 0; i < 5; i++) {
          const created = await call(serve.url, 'POST', '/v1/pets', { name: `Untold ${i}`, categoryId: 1 });
          assert.equal(created.status, 201, created.body);
          traceOf(created);
          await new Promise((resolve) => setTimeout(resolve, 60)); // let an export be attempted, and fail
        }
        const listed = await call(serve.url, 'GET', '/v1/pets');
        assert.equal(listed.status, 200);
        assert.deepEqual(
          (JSON.parse(listed.body) as { name: string }[]).map((pet) => pet.name),
          ['Untold 0', 'Untold 1', 'Untold 2', 'Untold 3', 'Untold 4'],
        );
        const { code } = await serve.stop();
        assert.equal(code, 0, serve.output());
        const warning = jsonLines(serve.stdout).find(
          (line) => line.msg === 'traces: the last spans were not exported',
        );
        assert.equal(warning?.level, 40, serve.output());
      } finally {
        await serve.kill();
      }
    } finally {
      database.remove();
    }
  });
});

describe('tracing off (no OTLP endpoint, OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER=none), and a request sampled out', () => {
  let database: TempDatabase;
  let otlp: OtlpReceiver;
  before(async () => {
    database = tempDatabase();
    otlp = await OtlpReceiver.start();
  });
  after(async () => {
    await otlp.close();
    database.remove();
  });

  for (const [when, env] of [
    ['no endpoint is set', { OTEL_SERVICE_NAME: 'untraced', OTEL_TRACES_SAMPLER: 'always_on' }],
    ['OTEL_SDK_DISABLED=true', { OTEL_SDK_DISABLED: 'true' }],
    ['OTEL_TRACES_EXPORTER=none', { OTEL_TRACES_EXPORTER: 'none' }],
  ] as const) {
    test(`when ${when}, then the SDK is never loaded, nothing is exported, and no answer or line carries a trace`, async () => {
      const serve = await startServe({
        DATABASE_URL: database.url,
        PETSTORE_API_KEYS: TEST_KEY,
        OTEL_BSP_SCHEDULE_DELAY: '50',
        NODE_OPTIONS: REPORT_MODULES,
        // With no endpoint, the SDK's default would be localhost:4318; the receiver stands where a
        // disabled SDK would otherwise export.
        ...(when === 'no endpoint is set' ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint }),
        ...env,
      });
      try {
        const created = await call(
          serve.url,
          'POST',
          '/v1/pets',
          { name: 'Dark', categoryId: 1 },
          {
            traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
          },
        );
        assert.equal(created.status, 201);
        assert.equal(created.headers.get('traceresponse'), null);
        const { code, stderr, stdout } = await serve.stop();
        assert.equal(code, 0);
        assert.equal(modulesLoaded(stderr), 0, stderr);
        const lines = jsonLines(stdout).filter((line) => line.msg === 'request');
        assert.equal(lines.length, 1);
        assert.equal('traceId' in (lines[0] as object), false);
        assert.deepEqual(otlp.requests, []);
      } finally {
        await serve.kill();
      }
    });
  }

  test('when the sampler leaves a request out, then its answer and line still name its trace (flags 00), but nothing is exported and its event records no cause', async () => {
    const serve = await startServe({
      DATABASE_URL: database.url,
      PETSTORE_API_KEYS: TEST_KEY,
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      OTEL_TRACES_SAMPLER: 'always_off',
    });
    try {
      const created = await call(serve.url, 'POST', '/v1/pets', { name: 'Unsampled', categoryId: 2 });
      assert.equal(created.status, 201);
      assert.match(created.headers.get('traceresponse') ?? '', /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
      const { id } = JSON.parse(created.body) as { id: number };
      const { code, stdout } = await serve.stop();
      assert.equal(code, 0);
      const line = jsonLines(stdout).find((entry) => entry.msg === 'request' && entry.url === '/v1/pets');
      assert.equal(line?.traceId, traceOf(created).traceId);
      assert.deepEqual(otlp.requests, [], 'nothing exported, even at shutdown');
      const events = await queryDatabase<{ data: string; trace_context: string | null }>(
        database.url,
        'SELECT data, trace_context FROM events',
      );
      const mine = events.filter((event) => JSON.parse(event.data).id === id);
      assert.deepEqual(
        mine.map((event) => event.trace_context),
        [null],
      );
    } finally {
      await serve.kill();
    }
  });
});
