// Animals and orders: lists with their status filter, paged along the API's own Link: rel="next".
import { call } from './api.js';
import { field, fill, h, select, table, time } from './dom.js';
import { act, button, needs, say, submitting } from './ui.js';

interface Pet {
  id: number;
  name: string;
  categoryId: number;
  status: string;
}
interface Order {
  id: number;
  petId: number;
  status: string;
  placedAt: string;
}

/** An integer field's text as a JSON value: digits as a number literal (int64 kept exact), else a string. */
const integer = (text: string): string => (/^-?\d+$/.test(text.trim()) ? text.trim() : JSON.stringify(text));

/** A paged list: a filter, a table, and First/Next page buttons that follow the API's links. */
function pagedList<T>(
  label: string,
  head: string[],
  row: (item: T) => HTMLTableRowElement,
  firstPath: () => string,
): { element: HTMLElement; load: () => Promise<void>; add: (item: T) => void } {
  const place = h('div');
  const paging = h('div', { class: 'actions' });
  let next: string | undefined;
  let page = 1;
  const body = () => place.querySelector('tbody');
  const show = async (path: string) => {
    const answer = await call<T[]>('GET', path);
    next = answer.next;
    fill(place, table(label, head, answer.data.map(row)));
    if (answer.data.length === 0) place.append(h('p', {}, 'None.'));
    fill(
      paging,
      page > 1 && button('First page', () => go(1, firstPath())),
      next !== undefined && button('Next page', () => go(page + 1, next as string)),
      h('span', {}, `Page ${page}`),
    );
  };
  const go = async (n: number, path: string) => {
    page = n;
    await show(path);
  };
  return {
    element: h('div', {}, place, paging),
    load: () => go(1, firstPath()),
    add: (item) => body()?.append(row(item)),
  };
}

export function animalsView(): { section: HTMLElement; open: () => Promise<void> } {
  const filter = select('status', [
    ['', 'Any'],
    ['available', 'Available'],
    ['pending', 'Pending'],
    ['sold', 'Sold'],
  ]);
  const row = (pet: Pet) =>
    h(
      'tr',
      { 'data-id': pet.id },
      h('td', {}, pet.id),
      h('td', {}, pet.name),
      h('td', {}, pet.categoryId),
      h('td', {}, pet.status),
    );
  const list = pagedList<Pet>('Animals list', ['Id', 'Name', 'Category', 'Status'], row, () =>
    filter.value ? `/v1/pets?status=${filter.value}` : '/v1/pets',
  );
  filter.addEventListener('change', () => void act(list.load));

  const name = h('input', { name: 'name', autocomplete: 'off', required: true });
  const categoryId = h('input', {
    name: 'categoryId',
    inputmode: 'numeric',
    autocomplete: 'off',
    required: true,
  });
  const status = select('status', [
    ['available', 'Available'],
    ['pending', 'Pending'],
    ['sold', 'Sold'],
  ]);
  const fields = {
    name: field('Name', name),
    categoryId: field('Category id', categoryId),
    status: field('Status', status),
  };
  const formError = h('p', { class: 'form-error', role: 'alert' });
  const form = h(
    'form',
    { novalidate: true, 'aria-labelledby': 'add-animal' },
    h('h3', { id: 'add-animal' }, 'Add an animal'),
    fields.name.wrap,
    fields.categoryId.wrap,
    fields.status.wrap,
    h('button', { type: 'submit' }, 'Add animal'),
    formError,
  );
  submitting(
    form,
    { name: fields.name.error, categoryId: fields.categoryId.error, status: fields.status.error },
    formError,
    async () => {
      const body = `{"name":${JSON.stringify(name.value)},"categoryId":${integer(categoryId.value)},"status":${JSON.stringify(status.value)}}`;
      const created = await call<Pet>('POST', '/v1/pets', body);
      if (!filter.value || filter.value === created.data.status) list.add(created.data);
      say(`Animal ${created.data.id} added: ${created.data.name}.`);
      form.reset();
    },
  );

  const section = h(
    'section',
    { 'aria-labelledby': 'animals-h' },
    h('h2', { id: 'animals-h' }, 'Animals'),
    h('div', { class: 'filters' }, field('Show status', filter).wrap),
    list.element,
    needs('pets:write', form),
  );
  return { section, open: list.load };
}

export function ordersView(): { section: HTMLElement; open: () => Promise<void> } {
  const filter = select('status', [
    ['', 'Any'],
    ['placed', 'Placed'],
    ['delivered', 'Delivered'],
    ['cancelled', 'Cancelled'],
  ]);
  const row = (order: Order): HTMLTableRowElement => {
    const tr: HTMLTableRowElement = h(
      'tr',
      { 'data-id': order.id },
      h('td', {}, order.id),
      h('td', {}, order.petId),
      h('td', {}, order.status),
      h('td', {}, time(order.placedAt)),
      h(
        'td',
        {},
        order.status === 'placed' &&
          needs(
            'orders:write',
            h(
              'span',
              { class: 'actions' },
              button('Deliver', () => change(order, 'deliver', tr), `Deliver order ${order.id}`),
              button('Cancel', () => change(order, 'cancel', tr), `Cancel order ${order.id}`),
            ),
          ),
      ),
    );
    return tr;
  };
  const change = async (order: Order, move: 'deliver' | 'cancel', tr: HTMLTableRowElement): Promise<void> => {
    const changed = await call<Order>('POST', `/v1/store/orders/${order.id}/${move}`);
    const replacement = row(changed.data);
    tr.replaceWith(replacement);
    say(`Order ${order.id} is ${changed.data.status}.`);
    // The button pressed is gone with its row: the focus goes to the row that replaced it.
    const cell = replacement.querySelector('td');
    cell?.setAttribute('tabindex', '-1');
    cell?.focus();
  };
  const list = pagedList<Order>('Orders list', ['Id', 'Animal', 'Status', 'Placed at', 'Actions'], row, () =>
    filter.value ? `/v1/store/orders?status=${filter.value}` : '/v1/store/orders',
  );
  filter.addEventListener('change', () => void act(list.load));

  const petId = h('input', { name: 'petId', inputmode: 'numeric', autocomplete: 'off', required: true });
  const petField = field('Animal id', petId);
  const formError = h('p', { class: 'form-error', role: 'alert' });
  const form = h(
    'form',
    { novalidate: true, 'aria-labelledby': 'place-order' },
    h('h3', { id: 'place-order' }, 'Place an order'),
    petField.wrap,
    h('button', { type: 'submit' }, 'Place order'),
    formError,
  );
  submitting(form, { petId: petField.error }, formError, async () => {
    const placed = await call<Order>('POST', '/v1/store/orders', `{"petId":${integer(petId.value)}}`);
    if (!filter.value || filter.value === 'placed') list.add(placed.data);
    say(`Order ${placed.data.id} placed for animal ${placed.data.petId}.`);
    form.reset();
  });
  const section = h(
    'section',
    { 'aria-labelledby': 'orders-h' },
    h('h2', { id: 'orders-h' }, 'Orders'),
    h('div', { class: 'filters' }, field('Show status', filter).wrap),
    list.element,
    needs('orders:write', form),
  );
  return { section, open: list.load };
}
