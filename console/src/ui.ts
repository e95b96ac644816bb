// What every view shares: the status line, scope-dependent controls, and a form's submit with errors.
import { ApiFailure, byField, explain, has, type Scope } from './api.js';
import { fill, h } from './dom.js';

export const statusLine = h('p', { class: 'status', role: 'status', 'aria-live': 'polite' });

export function say(text: string): void {
  statusLine.textContent = text;
}

/** The element, offered only while the key has `scope` (hidden once a 403 says it has not). */
export function needs<T extends HTMLElement>(scope: Scope, element: T): T {
  element.dataset.needs = scope;
  element.hidden = !has(scope);
  return element;
}

export function applyScopes(): void {
  for (const element of document.querySelectorAll<HTMLElement>('[data-needs]'))
    element.hidden = !has(element.dataset.needs as Scope);
}

/**
 * Runs `action` on submit: while it runs the form's button is disabled; the API's Error message is
 * shown beside the field it names (`errors`), or under the form.
 */
export function submitting(
  form: HTMLFormElement,
  errors: Record<string, HTMLElement>,
  formError: HTMLElement,
  action: () => Promise<void>,
): void {
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    for (const element of [...Object.values(errors), formError]) element.textContent = '';
    for (const control of form.querySelectorAll('[aria-invalid]')) control.removeAttribute('aria-invalid');
    const button = form.querySelector<HTMLButtonElement>('button[type=submit]');
    if (button) button.disabled = true;
    try {
      await action();
    } catch (error) {
      showError(error, errors, formError, form);
    } finally {
      if (button) button.disabled = false;
    }
  });
}

export function showError(
  error: unknown,
  errors: Record<string, HTMLElement>,
  formError: HTMLElement,
  form?: HTMLFormElement,
): void {
  if (error instanceof ApiFailure && error.status === 400) {
    const split = byField(error.message, Object.keys(errors));
    for (const [name, message] of split.fields) {
      const place = errors[name] as HTMLElement;
      place.textContent = message;
      form?.querySelector(`[name="${name}"]`)?.setAttribute('aria-invalid', 'true');
    }
    if (split.rest.length > 0) formError.textContent = split.rest.join('; ');
    return;
  }
  fill(formError, explain(error));
}

/** Runs a button's action, reporting a failure in the status line (and 403s hide what needs the scope). */
export async function act(action: () => Promise<void>): Promise<void> {
  try {
    await action();
  } catch (error) {
    say(explain(error));
    applyScopes();
  }
}

/** A button that runs `action` (reported with act). */
export function button(text: string, action: () => Promise<void> | void, label?: string): HTMLButtonElement {
  return h(
    'button',
    { type: 'button', 'aria-label': label, onclick: () => void act(async () => action()) },
    text,
  );
}
