import assert from 'node:assert/strict';
import { endpointLimitMessage } from '../../src/domain/webhook-endpoints.js';
import { after, backends, before, test } from '../support/backends.js';
import { queryDatabase } from '../support/db-inspect.js';
import { assertError } from '../support/error-body.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

/**
 * At most WEBHOOK_MAX_ENDPOINTS endpoints exist at once, however the creates race: many at once on two
 * nodes of one database, then what the database holds is counted.
 */
const MAX = 5;
const RACERS = 24;

for (const backend of backends) {
  backend.describe(`the webhook endpoint limit (${backend.name})`, () => {
    let a: TestServer;
    let b: TestServer;
    before(async () => {
      const env = { WEBHOOK_MAX_ENDPOINTS: String(MAX) };
      a = await startTestServer({ backend, env });
      b = await startTestServer({ backend, env, database: a.database });
    });
    after(async () => {
      await b?.close();
      await a?.close();
    });

    test(`when ${RACERS} creates race on two nodes with WEBHOOK_MAX_ENDPOINTS=${MAX}, then exactly ${MAX} are 201, the rest 409 conflict naming the limit, and the database holds ${MAX}`, async () => {
      const answers = await Promise.all(
        Array.from({ length: RACERS }, (_, i) =>
          (i % 2 ? a : b).request('POST', '/v1/webhook-endpoints', {
            body: { url: `https://hooks.example.com/${i}` },
          }),
        ),
      );
      assert.equal(answers.filter((res) => res.status === 201).length, MAX);
      for (const res of answers.filter((r) => r.status !== 201))
        assertError(res, 409, 'conflict', endpointLimitMessage(MAX));
      const [row] = await queryDatabase<{ n: number | string }>(
        a.database.url,
        'SELECT count(*) AS n FROM webhook_endpoints',
      );
      assert.equal(Number(row?.n), MAX);
    });

    test('when an endpoint is deleted at the limit, then one more may be created, and only one', async () => {
      const list = (await a.request('GET', '/v1/webhook-endpoints')).json<{ id: number }[]>();
      assert.equal(list.length, MAX);
      assert.equal((await a.request('DELETE', `/v1/webhook-endpoints/${list[0]?.id}`)).status, 204);
      const again = await b.request('POST', '/v1/webhook-endpoints', {
        body: { url: 'https://hooks.example.com/again' },
      });
      assert.equal(again.status, 201, again.text);
      assertError(
        await a.request('POST', '/v1/webhook-endpoints', { body: { url: 'https://hooks.example.com/over' } }),
        409,
        'conflict',
        endpointLimitMessage(MAX),
      );
    });
  });
}
