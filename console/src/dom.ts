// A few lines instead of a view library: elements are made with h() and their text is always set as
// text (document.createTextNode / textContent), never parsed as HTML, so untrusted text (a receiver's
// answer, an animal's name) cannot become markup.

type Child = Node | string | number | object | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>;

let ids = 0;
/** A fresh id for a label's `for`, an error's `aria-describedby`. */
export const uid = (prefix: string): string => `${prefix}-${++ids}`;

function apply(element: Element, attrs: Attrs): void {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (typeof value === 'function') element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? '' : String(value));
  }
}

function append(element: Element, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (child instanceof Node) element.append(child);
    // An exact int64 (api.ts, parseExact) shows its digits.
    else element.append(document.createTextNode(String((child as { rawJSON?: string }).rawJSON ?? child)));
  }
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  apply(element, attrs);
  append(element, children);
  return element;
}

export function svg(tag: string, attrs: Attrs = {}, ...children: Child[]): SVGElement {
  const element = document.createElementNS('http://www.w3.org/2000/svg', tag);
  apply(element, attrs);
  append(element, children);
  return element;
}

/** Replaces an element's children. */
export function fill(element: Element, ...children: Child[]): void {
  element.replaceChildren();
  append(element, children);
}

/** A labelled control: the label, the control, and a place for the API's message about that field. */
export function field(
  label: string,
  control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement,
): { wrap: HTMLElement; error: HTMLElement } {
  control.id ||= uid('f');
  const error = h('span', { class: 'field-error', id: uid('e'), role: 'alert' });
  control.setAttribute('aria-describedby', error.id);
  const wrap = h('div', { class: 'field' }, h('label', { for: control.id }, label), control, error);
  return { wrap, error };
}

export function select(name: string, options: readonly (readonly [string, string])[]): HTMLSelectElement {
  return h('select', { name }, ...options.map(([value, text]) => h('option', { value }, text)));
}

/** A table inside a focusable, labelled region, so it scrolls sideways by keyboard on a narrow screen. */
export function table(label: string, head: string[], rows: Node[]): HTMLElement {
  return h(
    'div',
    { class: 'scroll', role: 'region', 'aria-label': label, tabindex: 0 },
    h(
      'table',
      {},
      h('thead', {}, h('tr', {}, ...head.map((name) => h('th', { scope: 'col' }, name)))),
      h('tbody', {}, ...rows),
    ),
  );
}

export const time = (value: string | null | undefined): string =>
  value ? new Date(value).toISOString().replace('T', ' ').slice(0, 19) : '—';
