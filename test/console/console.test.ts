import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createRequire } from 'node:module';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { newApiKey } from '../../src/domain/api-keys.js';
import { CONSOLE_CSP } from '../../src/http/documents/console.js';
import { sqlite } from '../support/backends.js';
import { launchBrowser } from '../support/browser.js';
import { until } from '../support/eventually.js';
import { startTestServer, TEST_KEY, type TestServer } from '../support/test-server.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

/** A receiver's answer that would run script if it were ever shown as markup. */
const HOSTILE = '<img src=x onerror=alert(1)></script><script>alert(2)</script>';
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

interface Delivery {
  eventId: number;
  status: string;
  attempts: number;
}

/**
 * The console (/console, docs/console.md) in a real browser: one service on SQLite, one receiver and
 * one browser page for every test, which run in order, each going on from where the last left it.
 */
describe('the console in a real browser', () => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let readOnlyKey: string;
  let endpointId: number;
  const foreign: string[] = [];
  const dialogs: string[] = [];
  const pageErrors: string[] = [];
  const consoleErrors: string[] = [];
  /** Every API request the page made: its URL and Authorization header. */
  const apiRequests: { url: string; authorization: string | undefined; accept: string | undefined }[] = [];

  before(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer({
      backend: sqlite,
      // The receiver is on 127.0.0.1, which the network policy refuses unless allowed; a failed
      // delivery waits an hour, so only a retry asked for attempts it again.
      env: { WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8', WEBHOOK_RETRY_SCHEDULE: '1h' },
    });
    const reader = newApiKey('reader', new Date(), {
      scopes: ['pets:read', 'orders:read', 'events:read', 'webhooks:read'],
    });
    await server.storage.apiKeys.insert(reader.record);
    readOnlyKey = reader.secret;
    browser = await launchBrowser();
    context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    // Nothing may leave for another origin: such a request is refused and recorded.
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(`${server.url}/`)) return route.continue();
      foreign.push(url);
      return route.abort();
    });
    page = await context.newPage();
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    page.on('request', (request) => {
      if (new URL(request.url()).pathname.startsWith('/v1/'))
        apiRequests.push({
          url: request.url(),
          authorization: request.headers().authorization,
          accept: request.headers().accept,
        });
    });
    const res = await page.goto(`${server.url}/console`);
    assert.equal(res?.status(), 200);
    assert.equal(res?.headers()['content-security-policy'], CONSOLE_CSP);
  });
  after(async () => {
    await browser?.close();
    await server?.close();
    await receiver?.close();
  });

  const signIn = async (key: string, keep = false) => {
    await page.getByLabel('API key').fill(key);
    if (keep) await page.getByLabel('Keep for this tab').check();
    await page.getByRole('button', { name: 'Sign in' }).click();
  };
  const signOut = () => page.getByRole('button', { name: 'Sign out' }).click();
  const view = async (name: string) => {
    await page.getByRole('navigation', { name: 'Views' }).getByRole('button', { name }).click();
    await page
      .getByRole('heading', { level: 2, name: name === 'Webhooks' ? 'Webhook endpoints' : name })
      .waitFor();
  };
  const axe = async (what: string) => {
    // Through the DevTools protocol (page.evaluate), which the page's CSP does not govern: the page itself
    // loads no script but its own.
    if (!(await page.evaluate("'axe' in window"))) await page.evaluate(AXE_SOURCE);
    const violations = await page.evaluate<string[]>(
      'axe.run().then((result) => result.violations.map((v) => v.id + ": " + v.nodes.map((n) => n.target).join(" ")))',
    );
    assert.deepEqual(violations, [], `axe on ${what}`);
  };
  const deliveryOf = async (eventId: number) =>
    until(
      () => server.request('GET', `/v1/webhook-endpoints/${endpointId}/deliveries`),
      (res) => res.json<Delivery[]>().some((d) => d.eventId === eventId),
      `the delivery of event ${eventId}`,
    ).then((res) => res.json<Delivery[]>().find((d) => d.eventId === eventId) as Delivery);
  const lastEventId = async () => {
    const events = (await server.request('GET', '/v1/events?limit=100')).json<{ id: number }[]>();
    return Math.max(...events.map((e) => e.id));
  };
  const addAnimalByApi = async (name: string) => {
    const res = await server.request('POST', '/v1/pets', { body: { name, categoryId: 4 } });
    assert.equal(res.status, 201, res.text);
    return (await lastEventId()) as number;
  };

  test('when a key that is not valid signs in, then the API error is shown and nothing is offered', async () => {
    await axe('the sign-in form');
    await signIn('pst_not-a-key');
    await page.getByText('the API key is not valid').waitFor();
    assert.equal(await page.getByRole('navigation', { name: 'Views' }).getByRole('button').count(), 0);
  });

  test('when a read-only key signs in, then every view is offered and no write action is', async () => {
    await signIn(readOnlyKey);
    await page.getByText('This key may: pets:read, orders:read, events:read, webhooks:read.').waitFor();
    assert.match(
      (await page.locator('.who').textContent()) ?? '',
      /Not offered: what needs pets:write, orders:write, webhooks:write \(the API answered 403 forbidden: this key lacks those scopes\)\./,
    );
    const nav = page.getByRole('navigation', { name: 'Views' });
    assert.deepEqual(await nav.getByRole('button').allTextContents(), [
      'Animals',
      'Orders',
      'Events',
      'Webhooks',
    ]);
    await page.getByRole('heading', { name: 'Animals' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Add animal' }).count(), 0);
    await view('Orders');
    assert.equal(await page.getByRole('button', { name: 'Place order' }).count(), 0);
    await view('Webhooks');
    await page.getByText('No endpoint yet.').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Create endpoint' }).count(), 0);
    // The 403s that told: each refused write carried the key, and changed nothing.
    assert.equal((await server.request('GET', '/v1/events')).json<unknown[]>().length, 0);
    await signOut();
  });

  test('when the full key signs in by keyboard alone and ticks "keep for this tab", then it is kept in sessionStorage only, and sent only as a bearer header', async () => {
    // The key field has the focus on arrival.
    await page.keyboard.type(TEST_KEY);
    await page.keyboard.press('Tab');
    await page.keyboard.press('Space'); // "Keep for this tab"
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter'); // "Sign in"
    await page
      .getByText(
        'This key may: pets:read, pets:write, orders:read, orders:write, events:read, webhooks:read, webhooks:write.',
      )
      .waitFor();
    await page.reload();
    await page.getByRole('button', { name: 'Add animal' }).waitFor();
    const stored = await page.evaluate(
      '({ session: Object.values(sessionStorage), local: localStorage.length, cookie: document.cookie })',
    );
    assert.deepEqual(stored, { session: [TEST_KEY], local: 0, cookie: '' });
    assert.ok(apiRequests.length > 0);
    for (const request of apiRequests) {
      assert.match(request.authorization ?? '', /^Bearer pst_|^Bearer test-key-/, request.url);
      assert.ok(!request.url.includes(TEST_KEY) && !request.url.includes(readOnlyKey), request.url);
    }
  });

  test('when the events view is open and an animal is added, then it is in the list and arrives live as an event', async () => {
    await view('Events');
    await page.getByText('Stream: live').waitFor();
    await axe('the events view');
    await view('Animals');
    await page.getByLabel('Name').fill('Console Cat');
    await page.getByLabel('Category id').fill('9007199254740993');
    await page.getByRole('button', { name: 'Add animal' }).click();
    const row = page
      .getByRole('region', { name: 'Animals list' })
      .getByRole('row')
      .filter({ hasText: 'Console Cat' });
    await row.waitFor();
    assert.match((await row.textContent()) ?? '', /Console Cat9007199254740993available/);
    await axe('the animals view');
    await view('Events');
    const live = page.locator('ol.events li', { hasText: 'pet.created' });
    await live.waitFor();
    assert.match((await live.textContent()) ?? '', /#1 pet\.created .*"name":"Console Cat"/);
  });

  test('when a bad animal is added, then the API error is shown beside each field it names', async () => {
    await view('Animals');
    await page.getByLabel('Name').fill('');
    await page.getByLabel('Category id').fill('seven');
    await page.getByRole('button', { name: 'Add animal' }).click();
    const nameError = page.locator(`#${await page.getByLabel('Name').getAttribute('aria-describedby')}`);
    const categoryError = page.locator(
      `#${await page.getByLabel('Category id').getAttribute('aria-describedby')}`,
    );
    await categoryError.getByText(/must be an integer/).waitFor();
    assert.equal(await categoryError.textContent(), 'categoryId must be an integer');
    assert.match((await nameError.textContent()) ?? '', /^name must /);
    assert.equal(await page.getByLabel('Category id').getAttribute('aria-invalid'), 'true');
  });

  test('when an order is placed and cancelled, and another placed and delivered, then each change shows at once', async () => {
    const second = (
      await server.request('POST', '/v1/pets', { body: { name: 'Order Dog', categoryId: 2 } })
    ).json<{
      id: number;
    }>().id;
    await view('Orders');
    await page.getByLabel('Animal id').fill('1');
    await page.getByRole('button', { name: 'Place order' }).click();
    const orders = page.getByRole('region', { name: 'Orders list' });
    await orders
      .getByRole('row')
      .filter({ hasText: /^11placed/ })
      .waitFor();
    await axe('the orders view');
    await page.getByRole('button', { name: 'Cancel order 1' }).click();
    await orders
      .getByRole('row')
      .filter({ hasText: /^11cancelled/ })
      .waitFor();
    assert.equal(await page.getByRole('button', { name: 'Deliver order 1' }).count(), 0);
    await page.getByLabel('Animal id').fill(String(second));
    await page.getByRole('button', { name: 'Place order' }).click();
    await page.getByRole('button', { name: 'Deliver order 2' }).click();
    await orders
      .getByRole('row')
      .filter({ hasText: new RegExp(`^2${second}delivered`) })
      .waitFor();
    const stored = (await server.request('GET', '/v1/store/orders')).json<{ status: string }[]>();
    assert.deepEqual(
      stored.map((o) => o.status),
      ['cancelled', 'delivered'],
    );
  });

  test('when an endpoint is created on a receiver, then its secret is shown once and its delivery is seen to succeed', async () => {
    await view('Webhooks');
    await page.getByLabel('URL').fill(receiver.url('/console'));
    await page.getByLabel('Description').fill('Console receiver');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    const secret = page.locator('div.secret code');
    await secret.waitFor();
    assert.match((await secret.textContent()) ?? '', /^whsec_[A-Za-z0-9+/]+=*$/);
    const endpoints = (await server.request('GET', '/v1/webhook-endpoints')).json<
      { id: number; url: string }[]
    >();
    assert.equal(endpoints.length, 1);
    endpointId = (endpoints[0] as { id: number }).id;
    assert.equal(
      await page.getByRole('region', { name: 'Webhook endpoints list' }).getByText('enabled').count(),
      1,
    );
    await axe('the webhooks view with a secret shown');
    await page.getByRole('button', { name: 'Done: hide the secret' }).click();
    assert.equal(await secret.count(), 0);

    const eventId = await addAnimalByApi('Hooked Horse');
    await until(
      () => deliveryOf(eventId),
      (d) => d.status === 'succeeded',
      'the delivery to succeed',
    );
    await page.getByRole('button', { name: `Deliveries of endpoint ${endpointId}` }).click();
    const row = page.locator(`tr[data-event="${eventId}"]`);
    await row.waitFor();
    assert.match((await row.textContent()) ?? '', new RegExp(`^${eventId}succeeded1`));
  });

  test('when the receiver fails with markup in its answer, then the attempt shows it as text and nothing runs; a retry then succeeds', async () => {
    receiver.answer(() => ({ status: 500, body: HOSTILE, headers: { 'content-type': 'text/html' } }));
    const eventId = await addAnimalByApi('Failing Fox');
    await until(
      () => deliveryOf(eventId),
      (d) => d.attempts === 1,
      'the first attempt',
    );
    await page.getByRole('button', { name: 'Refresh deliveries' }).click();
    const row = page.locator(`tr[data-event="${eventId}"]`);
    await row.waitFor();
    assert.match((await row.textContent()) ?? '', new RegExp(`^${eventId}pending1`));
    await page.getByRole('button', { name: `Attempts of delivery ${eventId}` }).click();
    const attempts = page.getByRole('region', { name: `Attempts of delivery ${eventId}` });
    await attempts.waitFor();
    assert.equal(await attempts.locator('pre.body').textContent(), HOSTILE);
    assert.match((await attempts.getByRole('row').nth(1).textContent()) ?? '', /^1.*\d+ ms500schedule/);
    assert.equal(await page.locator('img, main script').count(), 0, 'no element made from the answer');
    await axe('the deliveries and attempts of an endpoint');

    receiver.answer(() => ({ status: 200, body: 'thanks' }));
    await page.getByRole('button', { name: `Retry delivery ${eventId}` }).click();
    await until(
      () => deliveryOf(eventId),
      (d) => d.status === 'succeeded',
      'the retried delivery to succeed',
    );
    await page.getByRole('button', { name: 'Refresh deliveries' }).click();
    await page.locator(`tr[data-event="${eventId}"]`, { hasText: 'succeeded' }).waitFor();
    await page.getByRole('button', { name: `Attempts of delivery ${eventId}` }).click();
    await attempts.getByRole('row').nth(2).waitFor();
    assert.match((await attempts.getByRole('row').nth(2).textContent()) ?? '', /^2.*200retry.*thanks$/);
    assert.deepEqual(dialogs, []);
    assert.deepEqual(pageErrors, []);
  });

  test('when the chart is asked for, then it draws the last hour: one bar per minute and the deliveries counted', async () => {
    await page.getByRole('button', { name: 'Chart of the last hour' }).click();
    const chart = page.getByRole('img', { name: /Deliveries per minute and their lag, last hour/ });
    await chart.waitFor();
    assert.equal(await chart.locator('rect').count(), 60);
    // Two deliveries, both attempted within the hour (the second's last attempt being its retry).
    assert.match(
      (await page.locator('.chart-summary').textContent()) ?? '',
      /^2 deliveries in the last hour/,
    );
    assert.equal(await chart.locator('polyline').count(), 1, 'the lag line');
  });

  test('when recovery is asked for since a time, then the console sends the recover operation that time and shows how many it queued', async () => {
    // An hour ago, as the field takes it: the user's local time, to the second.
    const anHourAgo = new Date(Date.now() - 60 * 60 * 1000);
    anHourAgo.setMilliseconds(0);
    const local = new Date(anHourAgo.getTime() - anHourAgo.getTimezoneOffset() * 60_000)
      .toISOString()
      .slice(0, 19);
    await page.getByLabel('Since (your time)').fill(local);
    const sent = page.waitForRequest((r) => r.url().endsWith(`/v1/webhook-endpoints/${endpointId}/recover`));
    await page.getByRole('button', { name: 'Recover', exact: true }).click();
    const request = await sent;
    assert.equal(request.method(), 'POST');
    assert.equal(request.headers()['content-type'], 'application/json');
    assert.deepEqual(request.postDataJSON(), { since: anHourAgo.toISOString() });
    const answer = await request.response();
    assert.ok(answer, 'the recover request was answered');
    assert.equal(answer.status(), 202);
    const { queued } = (await answer.json()) as { queued: number };
    await page.getByText(`${queued} deliveries queued for endpoint ${endpointId}.`).waitFor();
  });

  test('when an endpoint is disabled (its receiver answered 410), then its badge says why, and Enable, Rotate and Delete work', async () => {
    receiver.answer(() => ({ status: 410 }));
    await addAnimalByApi('Gone Goose');
    await until(
      () => server.request('GET', `/v1/webhook-endpoints/${endpointId}`),
      (res) => res.json<{ status: string }>().status === 'disabled',
      'the endpoint to be disabled',
    );
    receiver.answer(() => ({ status: 204 }));
    await page.getByRole('button', { name: 'Refresh endpoints' }).click();
    await page.getByRole('region', { name: 'Webhook endpoints list' }).getByText('disabled (gone)').waitFor();
    await page.getByRole('button', { name: `Enable endpoint ${endpointId}` }).click();
    await page
      .getByRole('region', { name: 'Webhook endpoints list' })
      .getByText(/^enabled/)
      .waitFor();
    assert.equal(
      (await server.request('GET', `/v1/webhook-endpoints/${endpointId}`)).json<{ status: string }>().status,
      'enabled',
    );

    await page.getByRole('button', { name: `Rotate secret of endpoint ${endpointId}` }).click();
    await page.locator('div.secret code').waitFor();
    assert.match((await page.locator('div.secret code').textContent()) ?? '', /^whsec_/);
    await page.getByRole('button', { name: 'Done: hide the secret' }).click();

    // Edit: only what changed, as a JSON merge patch.
    await page.getByRole('button', { name: `Edit endpoint ${endpointId}` }).click();
    await page
      .getByRole('form', { name: `Edit endpoint ${endpointId}` })
      .getByLabel('Description')
      .fill('Edited');
    const sent = page.waitForRequest((r) => r.method() === 'PATCH');
    await page.getByRole('button', { name: 'Save changes' }).click();
    const patch = await sent;
    assert.equal(patch.url(), `${server.url}/v1/webhook-endpoints/${endpointId}`);
    assert.equal(patch.headers()['content-type'], 'application/merge-patch+json');
    assert.deepEqual(patch.postDataJSON(), { description: 'Edited' });
    assert.equal((await patch.response())?.status(), 200);
    await page.getByRole('region', { name: 'Webhook endpoints list' }).getByText('Edited').waitFor();
    assert.equal(
      (await server.request('GET', `/v1/webhook-endpoints/${endpointId}`)).json<{ description: string }>()
        .description,
      'Edited',
    );

    await page.getByRole('button', { name: `Delete endpoint ${endpointId}` }).click();
    // Nothing is deleted before it is confirmed, and the focus is on the way out.
    assert.equal(await page.evaluate('document.activeElement.textContent'), 'Keep it');
    assert.equal((await server.request('GET', `/v1/webhook-endpoints/${endpointId}`)).status, 200);
    await axe('the confirmation of a delete');
    await page.getByRole('button', { name: `Yes, delete endpoint ${endpointId}` }).click();
    await page.getByText(`Endpoint ${endpointId} deleted.`).waitFor();
    assert.equal((await server.request('GET', `/v1/webhook-endpoints/${endpointId}`)).status, 404);
    assert.equal(
      await page
        .getByRole('region', { name: 'Webhook endpoints list' })
        .locator(`tr[data-id="${endpointId}"]`)
        .count(),
      0,
    );
  });

  test('when the stream is cut and events commit meanwhile, then the live view reconnects and shows each event once', async () => {
    await view('Events');
    await page.getByText('Stream: live').waitFor();
    const streamsBefore = apiRequests.filter((r) => r.accept === 'text/event-stream').length;
    // Every connection the service holds, the stream's included, ends at once.
    server.app.server.closeAllConnections();
    await page.getByText(/Stream: reconnecting after #/).waitFor();
    const one = await addAnimalByApi('While Cut 1');
    const two = await addAnimalByApi('While Cut 2');
    await page.locator(`ol.events li[data-id="${two}"]`).waitFor();
    await page.getByText('Stream: live').waitFor();
    assert.ok(
      apiRequests.filter((r) => r.accept === 'text/event-stream').length > streamsBefore,
      'a new stream',
    );
    const ids = await page
      .locator('ol.events li')
      .evaluateAll((items) => items.map((li) => Number(li.getAttribute('data-id'))));
    const expected = (await server.request('GET', '/v1/events?limit=100'))
      .json<{ id: number }[]>()
      .map((e) => e.id);
    assert.deepEqual(ids, [...expected].reverse(), 'every event once, newest first');
    assert.ok(ids.includes(one));

    await page.getByLabel('Show type').selectOption('order.placed');
    assert.deepEqual(await page.locator('ol.events li:visible strong').allTextContents(), [
      'order.placed',
      'order.placed',
    ]);
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.getByText(`Stream: paused after #${two}`).waitFor();
    const paused = apiRequests.length;
    await addAnimalByApi('While Paused');
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByLabel('Show type').selectOption('');
    await page.locator('ol.events li', { hasText: 'While Paused' }).waitFor();
    assert.equal(apiRequests.length, paused + 1, 'one request: the stream resumed');
  });

  test('when each view is shown 320 px wide in dark mode, then nothing overflows the page and axe finds no violation', async () => {
    await page.setViewportSize({ width: 320, height: 700 });
    await page.emulateMedia({ colorScheme: 'dark' });
    for (const name of ['Animals', 'Orders', 'Events', 'Webhooks']) {
      await view(name);
      const width = await page.evaluate<number>('document.documentElement.scrollWidth');
      assert.ok(width <= 320, `${name}: ${width} px wide`);
      await axe(`${name}, 320 px, dark`);
    }
  });

  test('when the page has run, then its JavaScript is at most 150 KB gzipped, nothing went elsewhere and the CSP refused nothing', async () => {
    const scripts = await page
      .locator('script[src]')
      .evaluateAll((items) =>
        items.map((script) => new URL(script.getAttribute('src') ?? '', script.baseURI).href),
      );
    assert.deepEqual(scripts, [`${server.url}/console/app.js`]);
    let total = 0;
    for (const url of scripts) {
      const { encoding, bytes } = await new Promise<{ encoding: string | undefined; bytes: number }>(
        (resolve, reject) => {
          httpRequest(url, { headers: { 'accept-encoding': 'gzip' } }, (res) => {
            let bytes = 0;
            res.on('data', (chunk: Buffer) => {
              bytes += chunk.length;
            });
            res.on('end', () => resolve({ encoding: res.headers['content-encoding'], bytes }));
          })
            .on('error', reject)
            .end();
        },
      );
      assert.equal(encoding, 'gzip');
      total += bytes;
    }
    assert.ok(total > 1000 && total <= 150 * 1024, `${total} bytes gzipped`);
    assert.deepEqual(foreign, []);
    assert.deepEqual(
      consoleErrors.filter((message) => /Content Security Policy|Refused/.test(message)),
      [],
    );
    assert.deepEqual(dialogs, []);
    assert.deepEqual(pageErrors, []);
  });
});
