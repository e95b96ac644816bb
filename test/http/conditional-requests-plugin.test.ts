import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { after, before, test } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { CACHE_CONTROL, conditionalRequests } from '../../src/http/request/conditional-requests.js';
import { digestOf } from '../../src/http/request/entity-tags.js';
import { registersAfter } from '../support/plugin-order.js';

/**
 * The conditional-requests plugin on its own, in process (inject): a small app with the plugin and
 * routes of each kind. The plugins it comes after (rate limit, content codings) are stood in for by
 * empty ones of the same names; a route that sets Content-Encoding itself stands in for compression.
 * The service's own routes are tested over HTTP in conditional-requests.test.ts.
 */

const BODY = '{"id":1,"name":"Rex"}';
const TAG = `"${digestOf(BODY)}"`;
const ok = { 200: { type: 'object', additionalProperties: true } };
let app: FastifyInstance;
/** Each route's schema as registered, after the plugin's onRoute changed it. */
const schemas = new Map<string, { headers?: unknown; response?: Record<string, { headers?: object }> }>();

before(async () => {
  app = Fastify();
  await app.register(fp(async () => {}, { name: 'rate-limit' }));
  await app.register(fp(async () => {}, { name: 'content-codings' }));
  await app.register(conditionalRequests);
  app.addHook('onRoute', (route) => {
    schemas.set(`${route.method} ${route.url}`, route.schema as never);
  });
  const send = (status: number) => async (_request: unknown, reply: import('fastify').FastifyReply) =>
    reply.code(status).type('application/json').send(BODY);
  app.get('/thing', { schema: { response: ok } }, send(200));
  app.get('/page', { schema: { response: ok } }, async (_request, reply) =>
    reply.header('Link', '</page?after=1>; rel="next"').type('application/json').send(BODY),
  );
  app.get('/coded', { schema: { response: ok } }, async (_request, reply) =>
    reply.header('Content-Encoding', 'gzip').type('application/json').send(BODY),
  );
  app.get('/identity', { schema: { response: ok } }, async (_request, reply) =>
    reply.header('Content-Encoding', 'identity').type('application/json').send(BODY),
  );
  app.get('/missing', { schema: { response: { ...ok, 404: ok } } }, send(404));
  app.get('/undocumented', send(200));
  app.post('/thing/deliver', { schema: { response: ok } }, send(200));
  app.post('/things', { schema: { response: { 201: ok } } }, send(201));
  app.delete('/thing', { schema: { response: ok } }, send(200));
  app.put('/thing', { schema: { response: ok } }, send(200));
  app.get('/bytes', { schema: { response: ok } }, async (_request, reply) =>
    reply.type('application/json').send(Buffer.from(BODY)),
  );
  app.get('/stream', { schema: { response: ok } }, async (_request, reply) =>
    reply.type('application/json').send(Readable.from([BODY])),
  );
  // Route-level onSend hooks that set Content-Encoding stand in for compression, which runs there.
  const encode =
    (coding: string) =>
    (
      _request: unknown,
      reply: import('fastify').FastifyReply,
      payload: unknown,
      done: (e: null, p: unknown) => void,
    ) => {
      reply.header('Content-Encoding', coding);
      done(null, payload);
    };
  app.get('/own-hook', { schema: { response: ok }, onSend: encode('br') }, send(200));
  app.get('/own-hooks', { schema: { response: ok }, onSend: [encode('gzip'), encode('deflate')] }, send(200));
  await app.ready();
});
after(() => app.close());

const call = (method: 'GET' | 'HEAD' | 'POST' | 'DELETE' | 'PUT', url: string, ifNoneMatch?: string) =>
  app.inject({ method, url, headers: ifNoneMatch === undefined ? {} : { 'if-none-match': ifNoneMatch } });

test('when a GET answers 200, then a strong ETag of its bytes and Cache-Control; If-None-Match naming it, or *, gives 304 and no body; HEAD the same', async () => {
  const full = await call('GET', '/thing');
  assert.deepEqual(
    [full.statusCode, full.headers.etag, full.headers['cache-control'], full.body],
    [200, TAG, CACHE_CONTROL, BODY],
  );
  for (const [method, header, etag] of [
    ['GET', TAG, TAG],
    ['GET', '*', TAG],
    ['GET', `"other", W/${TAG}`, TAG],
    ['GET', `${TAG.slice(0, -1)}-gzip"`, `${TAG.slice(0, -1)}-gzip"`],
    ['HEAD', TAG, TAG],
  ] as const) {
    const answer = await call(method, '/thing', header);
    assert.deepEqual(
      [
        answer.statusCode,
        answer.body,
        answer.headers.etag,
        answer.headers['content-type'],
        answer.headers['content-length'],
      ],
      [304, '', etag, undefined, undefined],
      `${method} ${header}`,
    );
  }
  const coded = await call('GET', '/thing', `${TAG.slice(0, -1)}-br"`);
  assert.equal(coded.headers.vary, 'Accept-Encoding', 'a 304 for a compressed answer varies as it did');
  assert.equal((await call('GET', '/thing', TAG)).headers.vary, undefined);
});

test('when If-None-Match names another tag, or is malformed, then 200 with the body', async () => {
  for (const header of ['"other"', 'garbage', `${TAG.slice(0, -1)}-zstd"`]) {
    const answer = await call('GET', '/thing', header);
    assert.deepEqual([answer.statusCode, answer.body, answer.headers.etag], [200, BODY, TAG], header);
  }
});

test('when a POST, PUT or DELETE answers 200 or 201, then it has no ETag, and If-None-Match never gives 304', async () => {
  for (const [method, url] of [
    ['POST', '/thing/deliver'],
    ['POST', '/things'],
    ['DELETE', '/thing'],
    ['PUT', '/thing'],
  ] as const) {
    for (const header of [undefined, '*', TAG]) {
      const answer = await call(method, url, header);
      assert.deepEqual(
        [answer.statusCode < 300, answer.body, answer.headers.etag, answer.headers['cache-control']],
        [true, BODY, undefined, undefined],
        `${method} ${url} ${header}`,
      );
    }
  }
});

test('when a GET answers other than 200, then no ETag and no 304', async () => {
  const answer = await call('GET', '/missing', '*');
  assert.deepEqual([answer.statusCode, answer.body, answer.headers.etag], [404, BODY, undefined]);
});

test('when a page has a next link, then its tag covers the link too', async () => {
  const answer = await call('GET', '/page');
  assert.equal(answer.headers.etag, `"${digestOf(BODY, '</page?after=1>; rel="next"')}"`);
  assert.equal((await call('GET', '/page', answer.headers.etag as string)).statusCode, 304);
  assert.equal(
    (await call('GET', '/page', TAG)).statusCode,
    200,
    'the tag of the bytes alone is another page',
  );
});

test('when an answer is compressed, then its tag names the coding; an identity coding does not', async () => {
  assert.equal((await call('GET', '/coded')).headers.etag, `"${digestOf(BODY)}-gzip"`);
  assert.equal((await call('GET', '/identity')).headers.etag, TAG);
  assert.equal(
    (await call('GET', '/undocumented')).headers.etag,
    TAG,
    'the tag does not need a documented 200',
  );
});

test('when a GET route documents its 200, then the plugin documents If-None-Match, the ETag and Cache-Control, and the 304; other routes are left alone', () => {
  const get = schemas.get('GET /thing');
  assert.deepEqual(Object.keys(get?.response?.[200]?.headers ?? {}), ['ETag', 'Cache-Control']);
  assert.ok(get?.response?.[304], 'the 304 documented');
  assert.deepEqual(Object.keys((get?.headers as { properties?: object })?.properties ?? {}), [
    'if-none-match',
  ]);
  assert.equal(schemas.get('POST /thing/deliver')?.response?.[304], undefined);
  assert.equal(schemas.get('POST /thing/deliver')?.headers, undefined);
  assert.equal(schemas.get('DELETE /thing')?.response?.[304], undefined);
  assert.equal(schemas.get('GET /undocumented'), undefined, 'no schema, none added');
});

test('when a GET answers 200, then its Cache-Control is exactly private, no-cache', async () => {
  assert.equal((await call('GET', '/thing')).headers['cache-control'], 'private, no-cache');
});

test('when a GET answers with a Buffer, then it is tagged as the same bytes as text; a stream is sent untagged and whole, If-None-Match or not', async () => {
  const bytes = await call('GET', '/bytes');
  assert.deepEqual([bytes.statusCode, bytes.headers.etag, bytes.body], [200, TAG, BODY]);
  assert.equal((await call('GET', '/bytes', TAG)).statusCode, 304);
  for (const header of [undefined, '*']) {
    const stream = await call('GET', '/stream', header);
    assert.deepEqual(
      [stream.statusCode, stream.body, stream.headers.etag, stream.headers['cache-control']],
      [200, BODY, undefined, undefined],
      String(header),
    );
  }
});

test('when a route has onSend hooks of its own (compression), then they run before the tag names the coding they set', async () => {
  assert.equal((await call('GET', '/own-hook')).headers.etag, `"${digestOf(BODY)}-br"`);
  assert.equal((await call('GET', '/own-hooks')).headers.etag, `"${digestOf(BODY)}-deflate"`);
});

test('when a compressed answer is not modified, then the 304 carries the tag the client sent, compressed or not', async () => {
  for (const sent of [`"${digestOf(BODY)}-gzip"`, `"${digestOf(BODY)}-br"`, TAG]) {
    const answer = await call('GET', '/coded', sent);
    assert.deepEqual([answer.statusCode, answer.headers.etag, answer.body], [304, sent, ''], sent);
  }
});

test('when a GET route documents its 200, then If-None-Match, the ETag, Cache-Control and the 304 are documented as openapi.json (the document the service serves) has them on getPet', () => {
  type Header = { schema: object; description: string };
  const getPet = (
    JSON.parse(readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8')) as {
      paths: Record<
        string,
        Record<
          string,
          {
            parameters: (Header & { name: string })[];
            responses: Record<string, { description: string; headers: Record<string, Header> }>;
          }
        >
      >;
    }
  ).paths['/pets/{petId}']?.get;
  // A header's schema as the document lists it: its description beside the schema, not in it.
  const asDocumented = ({ description, ...schema }: { description: string }): Header => ({
    schema,
    description,
  });
  const get = JSON.parse(JSON.stringify(schemas.get('GET /thing'))) as {
    headers: { properties: Record<string, { description: string }> };
    response: Record<
      string,
      { type?: string; description: string; headers: Record<string, { description: string }> }
    >;
  };
  const ifNoneMatch = getPet?.parameters.find((parameter) => parameter.name === 'if-none-match');
  assert.deepEqual(asDocumented(get.headers.properties['if-none-match'] as { description: string }), {
    schema: ifNoneMatch?.schema,
    description: ifNoneMatch?.description,
  });
  const tagHeaders = (headers: Record<string, { description: string }> | undefined) => ({
    ETag: asDocumented(headers?.ETag as { description: string }),
    'Cache-Control': asDocumented(headers?.['Cache-Control'] as { description: string }),
  });
  assert.deepEqual(tagHeaders(get.response[200]?.headers), {
    ETag: getPet?.responses[200]?.headers.ETag,
    'Cache-Control': getPet?.responses[200]?.headers['Cache-Control'],
  });
  const notModified = get.response[304];
  assert.deepEqual(
    {
      type: notModified?.type,
      description: notModified?.description,
      headers: tagHeaders(notModified?.headers),
    },
    { type: 'null', ...getPet?.responses[304] },
  );
});

test('when the plugins it comes after are not registered, then the app does not start, naming them; a plugin can come after it by its name', async () => {
  const alone = Fastify();
  alone.register(fp(async () => {}, { name: 'content-codings' }));
  alone.register(conditionalRequests);
  await assert.rejects(async () => alone.ready(), {
    message: "The dependency 'rate-limit' of plugin 'conditional-requests' is not registered",
  });
  const noCodings = Fastify();
  noCodings.register(fp(async () => {}, { name: 'rate-limit' }));
  noCodings.register(conditionalRequests);
  await assert.rejects(async () => noCodings.ready(), {
    message: "The dependency 'content-codings' of plugin 'conditional-requests' is not registered",
  });
  const dependent = Fastify();
  dependent.register(fp(async () => {}, { name: 'rate-limit' }));
  dependent.register(fp(async () => {}, { name: 'content-codings' }));
  dependent.register(conditionalRequests);
  assert.equal(await registersAfter(dependent, 'conditional-requests'), true);
  await dependent.close();
});
