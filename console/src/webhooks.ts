// Webhook endpoints, their deliveries and attempts, retry and recover, and a chart of the last hour.

import { EVENT_TYPES } from '../../src/domain/events.js';
import { call, has } from './api.js';
import { drawChart } from './chart.js';
import { field, fill, h, select, table, time } from './dom.js';
import { act, button, needs, say, submitting } from './ui.js';

interface Endpoint {
  id: number;
  url: string;
  types: string[];
  description: string;
  status: 'enabled' | 'disabled';
  disabledReason?: 'failing' | 'gone';
  createdAt: string;
  lastSuccessAt: string | null;
  failingSince: string | null;
  secret?: string;
}
export interface Delivery {
  eventId: number;
  status: string;
  attempts: number;
  lastAttemptAt: string | null;
  nextAttemptAt: string | null;
  lastResponseStatus: number | null;
  lastError: string | null;
}
interface Attempt {
  number: number;
  startedAt: string;
  durationMs: number;
  responseStatus: number | null;
  responseBody: string | null;
  error: string | null;
  trigger: string;
}

/** The event types as checkboxes: "every type" (*) or some of them. */
function typesFieldset(legend: string, chosen: readonly string[] = ['*']) {
  const boxes = ['*', ...EVENT_TYPES].map((type) => {
    const input = h('input', {
      type: 'checkbox',
      name: 'types',
      value: type,
      checked: chosen.includes(type),
    });
    return h('label', { class: 'check' }, input, type === '*' ? 'Every type (*)' : type);
  });
  const error = h('span', { class: 'field-error', role: 'alert' });
  const element = h('fieldset', {}, h('legend', {}, legend), ...boxes, error);
  const value = () =>
    [...element.querySelectorAll<HTMLInputElement>('input:checked')].map((input) => input.value);
  return { element, error, value };
}

function badge(endpoint: Endpoint): HTMLElement {
  if (endpoint.status === 'enabled')
    return h(
      'span',
      { class: `badge ${endpoint.failingSince ? 'warn' : 'ok'}` },
      endpoint.failingSince ? `enabled, failing since ${time(endpoint.failingSince)}` : 'enabled',
    );
  return h(
    'span',
    { class: 'badge bad' },
    `disabled (${endpoint.disabledReason ?? 'unknown'})`,
    endpoint.failingSince ? `, failing since ${time(endpoint.failingSince)}` : '',
  );
}

/** A secret, shown once, with a button that copies it. */
function secretPanel(id: number, secret: string): HTMLElement {
  const code = h('code', { id: `secret-${id}` }, secret);
  const panel: HTMLDivElement = h(
    'div',
    { class: 'secret', role: 'group', 'aria-label': `Signing secret of endpoint ${id}` },
    h('p', {}, `Signing secret of endpoint ${id}, shown only this once: keep it.`),
    code,
    h(
      'div',
      { class: 'actions' },
      button('Copy secret', async () => {
        await navigator.clipboard.writeText(secret);
        say('Secret copied.');
      }),
      button('Done', () => panel.remove(), 'Done: hide the secret'),
    ),
  );
  return panel;
}

export function webhooksView(): { section: HTMLElement; open: () => Promise<void> } {
  const place = h('div');
  const paging = h('div', { class: 'actions' });
  const secrets = h('div');
  const detail = h('div');
  let page = 1;

  const row = (endpoint: Endpoint): HTMLTableRowElement => {
    const id = endpoint.id;
    return h(
      'tr',
      { 'data-id': id },
      h('td', {}, id),
      h('td', { class: 'wrap' }, endpoint.url),
      h('td', {}, endpoint.types.join(', ')),
      h('td', {}, endpoint.description),
      h('td', {}, badge(endpoint)),
      h('td', {}, time(endpoint.lastSuccessAt)),
      h(
        'td',
        {},
        h(
          'span',
          { class: 'actions' },
          button('Deliveries', () => openDetail(endpoint), `Deliveries of endpoint ${id}`),
          needs(
            'webhooks:write',
            button('Edit', () => openEdit(endpoint), `Edit endpoint ${id}`),
          ),
          endpoint.status === 'disabled' &&
            needs(
              'webhooks:write',
              button(
                'Enable',
                async () => {
                  const enabled = await call<Endpoint>('POST', `/v1/webhook-endpoints/${id}/enable`);
                  replaceRow(enabled.data);
                  say(`Endpoint ${id} enabled.`);
                },
                `Enable endpoint ${id}`,
              ),
            ),
          needs(
            'webhooks:write',
            button(
              'Rotate secret',
              async () => {
                const rotated = await call<Endpoint>('POST', `/v1/webhook-endpoints/${id}/rotate-secret`);
                showSecret(id, rotated.data.secret ?? '');
                say(`Endpoint ${id} has a new secret; the old one signs too for 24 hours.`);
              },
              `Rotate secret of endpoint ${id}`,
            ),
          ),
          needs(
            'webhooks:write',
            button('Delete', () => confirmDelete(endpoint), `Delete endpoint ${id}`),
          ),
        ),
      ),
    );
  };
  const replaceRow = (endpoint: Endpoint) => {
    const replacement = row(endpoint);
    place.querySelector(`tr[data-id="${endpoint.id}"]`)?.replaceWith(replacement);
    // The button pressed may be gone with its row: the focus goes to the row that replaced it.
    const cell = replacement.querySelector('td');
    cell?.setAttribute('tabindex', '-1');
    cell?.focus();
  };
  const showSecret = (id: number, secret: string) => {
    const panel = secretPanel(id, secret);
    fill(secrets, panel);
    panel.querySelector('button')?.focus();
  };

  const load = async (path = '/v1/webhook-endpoints', n = 1) => {
    page = n;
    const answer = await call<Endpoint[]>('GET', path);
    fill(
      place,
      table(
        'Webhook endpoints list',
        ['Id', 'URL', 'Types', 'Description', 'Status', 'Last success', 'Actions'],
        answer.data.map(row),
      ),
    );
    if (answer.data.length === 0) place.append(h('p', {}, 'No endpoint yet.'));
    fill(
      paging,
      page > 1 && button('First page', () => load()),
      answer.next !== undefined && button('Next page', () => load(answer.next, page + 1)),
    );
  };

  const confirmDelete = (endpoint: Endpoint) => {
    const keep = button('Keep it', () => fill(detail));
    fill(
      detail,
      h(
        'div',
        { class: 'confirm', role: 'alertdialog', 'aria-labelledby': 'confirm-delete' },
        h(
          'p',
          { id: 'confirm-delete' },
          `Delete endpoint ${endpoint.id} (${endpoint.url})? Its pending deliveries are dropped.`,
        ),
        h(
          'div',
          { class: 'actions' },
          button(
            'Yes, delete',
            async () => {
              await call('DELETE', `/v1/webhook-endpoints/${endpoint.id}`);
              place.querySelector(`tr[data-id="${endpoint.id}"]`)?.remove();
              fill(detail);
              say(`Endpoint ${endpoint.id} deleted.`);
            },
            `Yes, delete endpoint ${endpoint.id}`,
          ),
          keep,
        ),
      ),
    );
    keep.focus();
  };

  const openEdit = (endpoint: Endpoint) => {
    const url = h('input', { name: 'url', type: 'url', value: endpoint.url, autocomplete: 'off' });
    const description = h('input', { name: 'description', value: endpoint.description, autocomplete: 'off' });
    const urlField = field('URL', url);
    const descriptionField = field('Description', description);
    const types = typesFieldset('Event types', endpoint.types);
    const formError = h('p', { class: 'form-error', role: 'alert' });
    const form = h(
      'form',
      { novalidate: true, 'aria-labelledby': 'edit-h' },
      h('h3', { id: 'edit-h' }, `Edit endpoint ${endpoint.id}`),
      urlField.wrap,
      types.element,
      descriptionField.wrap,
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'submit' }, 'Save changes'),
        button('Close', () => fill(detail), 'Close the edit form'),
      ),
      formError,
    );
    submitting(
      form,
      { url: urlField.error, types: types.error, description: descriptionField.error },
      formError,
      async () => {
        // Only what changed, as a JSON merge patch (RFC 7396).
        const patch: Record<string, unknown> = {};
        if (url.value !== endpoint.url) patch.url = url.value;
        if (description.value !== endpoint.description) patch.description = description.value;
        const chosen = types.value();
        if (chosen.join() !== endpoint.types.join()) patch.types = chosen;
        const changed = await call<Endpoint>(
          'PATCH',
          `/v1/webhook-endpoints/${endpoint.id}`,
          patch,
          'application/merge-patch+json',
        );
        replaceRow(changed.data);
        fill(detail);
        say(`Endpoint ${endpoint.id} saved.`);
      },
    );
    fill(detail, form);
    url.focus();
  };

  const openDetail = (endpoint: Endpoint) => {
    const id = endpoint.id;
    const filter = select('status', [
      ['', 'Any'],
      ['pending', 'Pending'],
      ['succeeded', 'Succeeded'],
      ['failed', 'Failed'],
    ]);
    const deliveries = h('div');
    const deliveryPaging = h('div', { class: 'actions' });
    const attempts = h('div');
    const chart = h('div');
    const base = `/v1/webhook-endpoints/${id}/deliveries`;
    const deliveryRow = (delivery: Delivery) =>
      h(
        'tr',
        { 'data-event': delivery.eventId },
        h('td', {}, delivery.eventId),
        h(
          'td',
          {},
          h(
            'span',
            {
              class: `badge ${delivery.status === 'succeeded' ? 'ok' : delivery.status === 'failed' ? 'bad' : 'warn'}`,
            },
            delivery.status,
          ),
        ),
        h('td', {}, delivery.attempts),
        h('td', {}, time(delivery.lastAttemptAt)),
        h('td', {}, time(delivery.nextAttemptAt)),
        h('td', {}, delivery.lastResponseStatus ?? '—'),
        h('td', { class: 'wrap' }, delivery.lastError ?? ''),
        h(
          'td',
          {},
          h(
            'span',
            { class: 'actions' },
            button(
              'Attempts',
              () => showAttempts(delivery.eventId),
              `Attempts of delivery ${delivery.eventId}`,
            ),
            needs(
              'webhooks:write',
              button(
                'Retry',
                async () => {
                  await call('POST', `${base}/${delivery.eventId}/retry`);
                  say(`Delivery of event ${delivery.eventId} retried: it is pending and attempted at once.`);
                  await loadDeliveries();
                },
                `Retry delivery ${delivery.eventId}`,
              ),
            ),
          ),
        ),
      );
    const loadDeliveries = async (path = filter.value ? `${base}?status=${filter.value}` : base) => {
      const answer = await call<Delivery[]>('GET', path);
      fill(
        deliveries,
        table(
          `Deliveries list of endpoint ${id}`,
          [
            'Event',
            'Status',
            'Attempts',
            'Last attempt',
            'Next attempt',
            'Last status',
            'Last error',
            'Actions',
          ],
          answer.data.map(deliveryRow),
        ),
      );
      if (answer.data.length === 0) deliveries.append(h('p', {}, 'No delivery.'));
      fill(
        deliveryPaging,
        answer.next !== undefined && button('Next page', () => loadDeliveries(answer.next)),
      );
    };
    const showAttempts = async (eventId: number) => {
      const answer = await call<Attempt[]>('GET', `${base}/${eventId}/attempts?limit=100`);
      fill(
        attempts,
        h('h4', { id: `attempts-${id}-${eventId}` }, `Attempts of delivery ${eventId}`),
        table(
          `Attempts of delivery ${eventId}`,
          ['#', 'Started', 'Duration', 'Status', 'Trigger', 'Error', 'Response body'],
          answer.data.map((attempt) =>
            h(
              'tr',
              {},
              h('td', {}, attempt.number),
              h('td', {}, time(attempt.startedAt)),
              h('td', {}, `${attempt.durationMs} ms`),
              h('td', {}, attempt.responseStatus ?? '—'),
              h('td', {}, attempt.trigger),
              h('td', { class: 'wrap' }, attempt.error ?? ''),
              // Untrusted text from the receiver: set as text, never as markup.
              h('td', {}, h('pre', { class: 'body' }, attempt.responseBody ?? '')),
            ),
          ),
        ),
      );
    };
    filter.addEventListener('change', () => void act(() => loadDeliveries()));

    const since = h('input', { name: 'since', type: 'datetime-local', step: 1, required: true });
    const until = h('input', { name: 'until', type: 'datetime-local', step: 1 });
    const sinceField = field('Since (your time)', since);
    const untilField = field('Until (optional)', until);
    const recoverError = h('p', { class: 'form-error', role: 'alert' });
    const recover = h(
      'form',
      { novalidate: true, 'aria-labelledby': `recover-${id}` },
      h('h4', { id: `recover-${id}` }, 'Recover deliveries'),
      h('p', {}, 'Queues again the deliveries of the events since a time (for a receiver that lost them).'),
      sinceField.wrap,
      untilField.wrap,
      h('button', { type: 'submit' }, 'Recover'),
      recoverError,
    );
    const instant = (value: string) => (value ? new Date(value).toISOString() : undefined);
    submitting(recover, { since: sinceField.error, until: untilField.error }, recoverError, async () => {
      const body: Record<string, string> = {};
      const from = instant(since.value);
      const to = instant(until.value);
      if (from) body.since = from;
      if (to) body.until = to;
      const answer = await call<{ queued: number }>('POST', `/v1/webhook-endpoints/${id}/recover`, body);
      say(`${answer.data.queued} deliveries queued for endpoint ${id}.`);
      await loadDeliveries();
    });

    fill(
      detail,
      h(
        'section',
        { 'aria-labelledby': `detail-${id}` },
        h('h3', { id: `detail-${id}` }, `Deliveries of endpoint ${id}`),
        h('p', { class: 'wrap' }, endpoint.url),
        h(
          'div',
          { class: 'filters' },
          field('Show status', filter).wrap,
          button('Refresh', () => loadDeliveries(), 'Refresh deliveries'),
          button('Chart of the last hour', () => drawChart(chart, base, has('events:read'))),
          button('Close', () => fill(detail), 'Close the deliveries'),
        ),
        deliveries,
        deliveryPaging,
        attempts,
        chart,
        needs('webhooks:write', recover),
      ),
    );
    detail.querySelector('h3')?.setAttribute('tabindex', '-1');
    detail.querySelector<HTMLElement>('h3')?.focus();
    return act(() => loadDeliveries());
  };

  // Create
  const url = h('input', { name: 'url', type: 'url', autocomplete: 'off', required: true });
  const description = h('input', { name: 'description', autocomplete: 'off' });
  const urlField = field('URL', url);
  const descriptionField = field('Description', description);
  const types = typesFieldset('Event types');
  const formError = h('p', { class: 'form-error', role: 'alert' });
  const form = h(
    'form',
    { novalidate: true, 'aria-labelledby': 'create-endpoint' },
    h('h3', { id: 'create-endpoint' }, 'Create an endpoint'),
    urlField.wrap,
    types.element,
    descriptionField.wrap,
    h('button', { type: 'submit' }, 'Create endpoint'),
    formError,
  );
  submitting(
    form,
    { url: urlField.error, types: types.error, description: descriptionField.error },
    formError,
    async () => {
      const body: Record<string, unknown> = { url: url.value, types: types.value() };
      if (description.value) body.description = description.value;
      const created = await call<Endpoint>('POST', '/v1/webhook-endpoints', body);
      const { secret, ...endpoint } = created.data;
      place.querySelector('tbody')?.append(row(endpoint));
      place.querySelector('tbody + p, .scroll + p')?.remove();
      showSecret(endpoint.id, secret ?? '');
      say(`Endpoint ${endpoint.id} created.`);
      form.reset();
    },
  );

  const section = h(
    'section',
    { 'aria-labelledby': 'webhooks-h' },
    h('h2', { id: 'webhooks-h' }, 'Webhook endpoints'),
    h(
      'div',
      { class: 'actions' },
      button('Refresh', () => load(), 'Refresh endpoints'),
    ),
    secrets,
    place,
    paging,
    detail,
    needs('webhooks:write', form),
  );
  return { section, open: () => load() };
}
