// The console (docs/console.md): sign in with an API key, then the views its scopes allow.
import {
  ApiFailure,
  has,
  keptKey,
  onScopesChanged,
  probeScopes,
  SCOPES,
  type Scope,
  signOut,
  useKey,
} from './api.js';
import { fill, h } from './dom.js';
import { eventsView } from './events.js';
import { animalsView, ordersView } from './store.js';
import { applyScopes, statusLine } from './ui.js';
import { webhooksView } from './webhooks.js';

interface View {
  name: string;
  scope: Scope;
  section: HTMLElement;
  open: () => Promise<void>;
  opened?: boolean;
}

const main = h('main', { id: 'main', tabindex: -1 });
const nav = h('nav', { 'aria-label': 'Views' });
const who = h('div', { class: 'who' });
let stopStream: (() => void) | undefined;

document.body.append(
  h('header', {}, h('h1', {}, 'Animal store console'), who),
  nav,
  main,
  h('footer', {}, statusLine),
);

function signInForm(message = ''): void {
  stopStream?.();
  fill(nav);
  fill(who);
  const key = h('input', {
    id: 'key',
    name: 'key',
    type: 'password',
    autocomplete: 'off',
    required: true,
    spellcheck: 'false',
  });
  const keep = h('input', { id: 'keep', name: 'keep', type: 'checkbox' });
  const error = h('p', { class: 'form-error', role: 'alert', id: 'signin-error' }, message);
  key.setAttribute('aria-describedby', 'signin-error');
  const form = h(
    'form',
    { novalidate: true, 'aria-labelledby': 'signin-h' },
    h('h2', { id: 'signin-h' }, 'Sign in'),
    h(
      'p',
      {},
      'With an API key of this service (kept in this page only; in this tab too if you tick the box).',
    ),
    h('div', { class: 'field' }, h('label', { for: 'key' }, 'API key'), key),
    h('div', { class: 'field check' }, keep, h('label', { for: 'keep' }, 'Keep for this tab')),
    h('button', { type: 'submit' }, 'Sign in'),
    error,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void signIn(key.value.trim(), keep.checked, error);
  });
  fill(main, form);
  key.focus();
}

async function signIn(key: string, keep: boolean, error: HTMLElement | undefined): Promise<void> {
  useKey(key, keep);
  try {
    await probeScopes();
  } catch (failure) {
    signOut();
    const text = failure instanceof ApiFailure ? failure.message : String(failure);
    if (error) error.textContent = text;
    else signInForm(text);
    return;
  }
  start();
}

function start(): void {
  const events = eventsView();
  stopStream = events.stop;
  const all: View[] = [
    { name: 'Animals', scope: 'pets:read', ...animalsView() },
    { name: 'Orders', scope: 'orders:read', ...ordersView() },
    { name: 'Events', scope: 'events:read', ...events },
    { name: 'Webhooks', scope: 'webhooks:read', ...webhooksView() },
  ];
  const views = all.filter((view) => has(view.scope));
  const buttons = views.map((view) =>
    h('button', { type: 'button', onclick: () => show(view), 'aria-current': 'false' }, view.name),
  );
  const show = (view: View) => {
    for (const [i, other] of views.entries()) {
      other.section.hidden = other !== view;
      buttons[i]?.setAttribute('aria-current', String(other === view ? 'page' : false));
    }
    if (!view.opened) {
      view.opened = true;
      void view.open();
    }
  };
  fill(nav, h('ul', {}, ...buttons.map((b) => h('li', {}, b))));
  const granted = SCOPES.filter(has);
  const refused = SCOPES.filter((scope) => !has(scope));
  fill(
    who,
    h(
      'span',
      {},
      `Signed in. This key may: ${granted.join(', ') || 'nothing'}.`,
      refused.length > 0 &&
        ` Not offered: what needs ${refused.join(', ')} (the API answered 403 forbidden: this key lacks ${refused.length === 1 ? 'that scope' : 'those scopes'}).`,
    ),
    h(
      'button',
      {
        type: 'button',
        onclick: () => {
          signOut();
          signInForm();
        },
      },
      'Sign out',
    ),
  );
  fill(main, ...views.map((view) => view.section));
  for (const view of views) view.section.hidden = true;
  buttons[0]?.focus();
  if (views[0]) show(views[0]);
  else main.append(h('p', {}, 'This key may read nothing the console shows.'));
}

onScopesChanged(applyScopes);
const kept = keptKey();
if (kept) void signIn(kept, true, undefined);
else signInForm();
