import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { sqlite } from '../support/backends.js';
import { launchBrowser } from '../support/browser.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';

const SCREENSHOT = new URL('../../test-results/docs-page.png', import.meta.url);

describe('docs page in a real browser', () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  const foreignRequests: string[] = [];
  const consoleErrors: string[] = [];

  before(async () => {
    server = await startTestServer({ backend: sqlite });
    await server.request('POST', '/v1/pets', { body: { name: 'Docs Dog', categoryId: 7, status: 'sold' } });
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

  test('when a key is pasted and listPets is tried, then the live call returns the stored pet', async () => {
    await page
      .getByRole('button', { name: /Authorize/ })
      .first()
      .click();
    await page.locator('.modal-ux input[type=text], .modal-ux input[type=password]').first().fill(TEST_KEY);
    await page.locator('.modal-ux button.authorize').click();
    await page.locator('.modal-ux button.btn-done').click();

    const operation = page.locator('#operations-pets-listPets');
    await operation.locator('.opblock-summary').click();
    const tryIt = operation.getByRole('button', { name: 'Try it out' });
    if (await tryIt.count()) await tryIt.click();
    await operation.getByRole('button', { name: 'Execute' }).click();
    const live = operation.locator('.live-responses-table tbody .response-col_status').first();
    await live.waitFor();
    assert.equal(((await live.textContent()) ?? '').trim().slice(0, 3), '200');
    assert.match((await operation.locator('.live-responses-table').textContent()) ?? '', /Docs Dog/);

    mkdirSync(new URL('.', SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT.pathname, fullPage: false });
  });

  test('when the page has rendered, then nothing was fetched from elsewhere and no CSP error occurred', () => {
    assert.deepEqual(foreignRequests, []);
    assert.deepEqual(
      consoleErrors.filter((message) => /Content Security Policy|Refused/.test(message)),
      [],
    );
  });
});
