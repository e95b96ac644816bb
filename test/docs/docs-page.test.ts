import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { sqlite } from '../support/backends.js';
import { launchBrowser } from '../support/browser.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

const SCREENSHOT = new URL('../../test-results/docs-page.png', import.meta.url);
/** Beyond 2^53: JavaScript numbers would show it as 9007199254740992. */
const BIG_CATEGORY = '9007199254740993';

describe('docs page in a real browser', () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  /** An available animal, for the Store's "try it". */
  let storeCat: number;
  const foreignRequests: string[] = [];
  const consoleErrors: string[] = [];

  before(async () => {
    server = await startTestServer({ backend: sqlite });
    // As text: JSON.stringify cannot write an integer beyond 2^53.
    const created = await server.request('POST', '/v1/pets', {
      body: `{"name":"Docs Dog","categoryId":${BIG_CATEGORY},"status":"sold"}`,
    });
    assert.equal(created.status, 201);
    const forSale = await server.request('POST', '/v1/pets', { body: { name: 'Store Cat', categoryId: 2 } });
    assert.equal(forSale.status, 201);
    storeCat = forSale.json<{ id: number }>().id;
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1200, height: 1400 } });
    page.on('request', (request) => {
      if (!request.url().startsWith(server.url) && !request.url().startsWith('data:'))
        foreignRequests.push(request.url());
    });
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    await page.goto(`${server.url}/docs`);
    await page.locator('.opblock').first().waitFor();
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  test('when the page loads, then the three operations are listed and getPet is shown deprecated', async () => {
    for (const operation of ['listPets', 'createPet', 'getPet']) {
      assert.equal(await page.locator(`#operations-pets-${operation}`).count(), 1, operation);
    }
    assert.equal(await page.locator('#operations-pets-getPet.opblock-deprecated').count(), 1);
    const text = (await page.locator('body').textContent()) ?? '';
    assert.match(text, /Thu, 05 Dec 2030 00:00:00 GMT/, 'the sunset date is shown');
    assert.match(text, /rel="next"/, 'the paging decision is shown');
  });

  test('when the page loads, then the Store group is shown beside the Pets group with its five operations', async () => {
    const groups = await page.locator('.opblock-tag').allTextContents();
    assert.ok(
      groups.some((g) => g.startsWith('pets')) && groups.some((g) => g.startsWith('store')),
      groups.join(' | '),
    );
    for (const operation of ['listOrders', 'placeOrder', 'getOrder', 'deliverOrder', 'cancelOrder']) {
      assert.equal(await page.locator(`#operations-store-${operation}`).count(), 1, operation);
    }
  });

  test('when the page loads, then the events and webhooks groups show their operations, and a webhook endpoint shows its true example', async () => {
    const groups = await page.locator('.opblock-tag').allTextContents();
    assert.ok(
      groups.some((g) => g.startsWith('events')) && groups.some((g) => g.startsWith('webhooks')),
      groups.join(' | '),
    );
    for (const operation of ['listEvents', 'getEvent'])
      assert.equal(await page.locator(`#operations-events-${operation}`).count(), 1, operation);
    for (const operation of [
      'createWebhookEndpoint',
      'listWebhookEndpoints',
      'getWebhookEndpoint',
      'deleteWebhookEndpoint',
      'enableWebhookEndpoint',
      'rotateWebhookEndpointSecret',
      'listWebhookDeliveries',
      'retryWebhookDelivery',
    ])
      assert.equal(await page.locator(`#operations-webhooks-${operation}`).count(), 1, operation);
    const create = page.locator('#operations-webhooks-createWebhookEndpoint');
    await create.locator('.opblock-summary').click();
    const shown = await create.locator('.responses-wrapper').innerText();
    assert.match(shown, /"secret": "whsec_/);
    assert.match(shown, /"url": "https:\/\/hooks\.example\.com\/animal-store"/);
    await create.locator('.opblock-summary').click();
  });

  test('when a key is pasted and listPets is executed at once (try-it-out is on), then the live call shows the stored pet with its int64 exact', async () => {
    await page
      .getByRole('button', { name: /Authorize/ })
      .first()
      .click();
    await page.locator('.modal-ux input[type=text], .modal-ux input[type=password]').first().fill(TEST_KEY);
    await page.locator('.modal-ux button.authorize').click();
    await page.locator('.modal-ux button.btn-done').click();

    const operation = page.locator('#operations-pets-listPets');
    await operation.locator('.opblock-summary').click();
    // Already on (docs/api.md says so): the button offered is the one that turns it off.
    await operation.getByRole('button', { name: 'Cancel' }).waitFor();
    assert.equal(await operation.getByRole('button', { name: 'Try it out' }).count(), 0);
    await operation.getByRole('button', { name: 'Execute' }).click();
    const live = operation.locator('.live-responses-table tbody .response-col_status').first();
    await live.waitFor();
    assert.equal(((await live.textContent()) ?? '').trim().slice(0, 3), '200');
    const body =
      (await operation
        .locator('.live-responses-table .response-col_description pre')
        .first()
        .textContent()) ?? '';
    assert.match(body, /"name": "Docs Dog"/);
    assert.match(body, new RegExp(`"categoryId": ${BIG_CATEGORY}\\b`), 'the exact digits the service sent');
    assert.doesNotMatch(body, /9007199254740992/);

    // The picture in docs/api.md (docs/images/docs-page.png is copied from it): the call and its exact answer.
    await operation
      .locator('.live-responses-table')
      .evaluate((table) => table.scrollIntoView({ block: 'center' }));
    mkdirSync(new URL('.', SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT.pathname, fullPage: false });
  });

  test('when createPet is executed with the example it offers, then the service stores Rex', async () => {
    const operation = page.locator('#operations-pets-createPet');
    await operation.locator('.opblock-summary').click();
    const example = await operation.locator('textarea.body-param__text').inputValue();
    assert.deepEqual(JSON.parse(example), { name: 'Rex', categoryId: 1 });
    await operation.getByRole('button', { name: 'Execute' }).click();
    const live = operation.locator('.live-responses-table tbody .response-col_status').first();
    await live.waitFor();
    assert.equal(((await live.textContent()) ?? '').trim().slice(0, 3), '201');
    assert.match((await operation.locator('.live-responses-table').textContent()) ?? '', /"name": "Rex"/);
  });

  test('when placeOrder is executed for an available animal, then the live call shows the placed order, and its 409 is documented with the conflict code', async () => {
    const operation = page.locator('#operations-store-placeOrder');
    await operation.locator('.opblock-summary').click();
    const body = operation.locator('textarea.body-param__text');
    assert.deepEqual(JSON.parse(await body.inputValue()), { petId: 1 }, 'the example it offers');
    await body.fill(JSON.stringify({ petId: storeCat }));
    await operation.getByRole('button', { name: 'Execute' }).click();
    const live = operation.locator('.live-responses-table tbody .response-col_status').first();
    await live.waitFor();
    assert.equal(((await live.textContent()) ?? '').trim().slice(0, 3), '201');
    const answer = (await operation.locator('.live-responses-table').textContent()) ?? '';
    assert.match(answer, new RegExp(`"petId": ${storeCat}\\b`));
    assert.match(answer, /"status": "placed"/);
    const conflict = JSON.parse(
      (await operation.locator('tr.response[data-code="409"] pre.example').first().textContent()) ?? '',
    ) as { code: string; status: number };
    assert.deepEqual([conflict.code, conflict.status], ['conflict', 409]);
    assert.equal(
      (await server.request('GET', `/v1/pets/${storeCat}`)).json<{ status: string }>().status,
      'pending',
    );
  });

  test('when the documented responses are read, then each error shows its own code and status', async () => {
    const operation = page.locator('#operations-pets-getPet');
    await operation.locator('.opblock-summary').click();
    for (const [status, code] of [
      ['401', 'unauthorized'],
      ['404', 'not_found'],
      ['410', 'gone'],
      ['429', 'rate_limited'],
      ['503', 'unavailable'],
    ] as const) {
      const example = JSON.parse(
        (await operation.locator(`tr.response[data-code="${status}"] pre.example`).first().textContent()) ??
          '',
      ) as { code: string; status: number };
      assert.deepEqual([example.code, example.status], [code, Number(status)], `the ${status} example`);
    }
  });

  test('when an operation is opened, then it shows the scope it needs and its 403 example', async () => {
    for (const [tag, operationId, scope] of [
      ['pets', 'listPets', 'pets:read'],
      ['pets', 'createPet', 'pets:write'],
      ['store', 'getOrder', 'orders:read'],
      ['store', 'cancelOrder', 'orders:write'],
    ] as const) {
      const operation = page.locator(`#operations-${tag}-${operationId}`);
      if ((await operation.locator('.opblock-body').count()) === 0)
        await operation.locator('.opblock-summary').click();
      const description = (await operation.locator('.opblock-description-wrapper').allTextContents()).join(
        ' ',
      );
      assert.match(
        description,
        new RegExp(`Needs an API key with the scope ${scope}; without it, 403 forbidden`),
      );
      const example = JSON.parse(
        (await operation.locator('tr.response[data-code="403"] pre.example').first().textContent()) ?? '',
      ) as { code: string; status: number; message: string };
      assert.deepEqual(example, {
        code: 'forbidden',
        message: `this API key does not have the scope ${scope}, which this operation needs`,
        status: 403,
      });
    }
  });

  test('when the page has rendered, then nothing was fetched from elsewhere and no CSP error occurred', () => {
    assert.deepEqual(foreignRequests, []);
    assert.deepEqual(
      consoleErrors.filter((message) => /Content Security Policy|Refused/.test(message)),
      [],
    );
  });
});
