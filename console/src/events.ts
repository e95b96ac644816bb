// Events: the feed, then the live stream (docs/event-stream.md), read with fetch so that the key goes
// in the Authorization header (EventSource cannot send one). Newest first; a reconnect resumes after the
// last id received (Last-Event-ID), and an id already shown is never shown again.
import { EVENT_TYPES } from '../../src/domain/events.js';
import { authorization, call, parseExact } from './api.js';
import { h, select } from './dom.js';
import { act, say } from './ui.js';

interface ApiEvent {
  id: number;
  type: string;
  occurredAt: string;
  data: unknown;
}

/** At most this many events are kept on the page (the oldest go). */
const KEPT = 500;
/** Feed pages read before the stream takes over (it catches up the rest itself). */
const FEED_PAGES = 10;

export function eventsView(): { section: HTMLElement; open: () => Promise<void>; stop: () => void } {
  const filter = select('type', [['', 'Every type'], ...EVENT_TYPES.map((t) => [t, t] as const)]);
  filter.id = 'event-type';
  const list = h('ol', { class: 'events', 'aria-label': 'Events, newest first' });
  const state = h('span', { class: 'badge' }, 'not started');
  let lastId = 0;
  let controller: AbortController | undefined;
  let paused = false;
  let started = false;
  let retryMs = 2000;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const visible = (type: string) => !filter.value || filter.value === type;
  const show = (event: ApiEvent) => {
    if (event.id <= lastId) return; // already shown: a reconnect never shows one twice
    lastId = event.id;
    const item = h(
      'li',
      { 'data-type': event.type, 'data-id': event.id, hidden: !visible(event.type) },
      h('span', { class: 'event-id' }, `#${event.id}`),
      ' ',
      h('strong', {}, event.type),
      ' ',
      h('time', { datetime: event.occurredAt }, event.occurredAt),
      h('code', {}, JSON.stringify(event.data)),
    );
    list.prepend(item);
    while (list.childElementCount > KEPT) list.lastElementChild?.remove();
  };
  filter.addEventListener('change', () => {
    for (const item of list.children)
      (item as HTMLElement).hidden = !visible((item as HTMLElement).dataset.type ?? '');
  });

  const setState = (text: string) => {
    state.textContent = text;
  };

  /** Reads one stream until it ends; resolves when it does (or is aborted). */
  const stream = async (signal: AbortSignal) => {
    const res = await fetch(`/v1/events?after=${lastId}`, {
      headers: {
        authorization: authorization(),
        accept: 'text/event-stream',
        'last-event-id': String(lastId),
      },
      cache: 'no-store',
      signal,
    });
    if (!res.ok || !res.body) {
      const body = (await res.json().catch(() => ({}))) as { message?: string };
      const refused = new Error(`the stream was refused: ${body.message ?? res.status}`);
      // A key that is no longer valid, or lacks the scope, will not do better by asking again.
      (refused as Error & { final?: boolean }).final = res.status === 401 || res.status === 403;
      throw refused;
    }
    setState('live');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffer += value;
      let end = buffer.search(/\r?\n\r?\n/);
      while (end !== -1) {
        const message = buffer.slice(0, end);
        buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
        let data = '';
        for (const line of message.split(/\r?\n/)) {
          if (line.startsWith('data:')) data += line.slice(5).trimStart();
          else if (line.startsWith('retry:')) retryMs = Number(line.slice(6).trim()) || retryMs;
        }
        if (data) show(parseExact(data) as ApiEvent);
        end = buffer.search(/\r?\n\r?\n/);
      }
    }
  };

  const connect = () => {
    clearTimeout(timer);
    controller = new AbortController();
    const { signal } = controller;
    setState('connecting');
    stream(signal).then(
      () => reconnect(signal),
      (error: unknown) => {
        if (signal.aborted) return;
        say(error instanceof Error ? error.message : String(error));
        if ((error as { final?: boolean }).final) setState('stopped');
        else reconnect(signal);
      },
    );
  };
  const reconnect = (signal: AbortSignal) => {
    if (signal.aborted || paused) return;
    setState(`reconnecting after #${lastId}`);
    timer = setTimeout(connect, retryMs);
  };

  const pause = h(
    'button',
    {
      type: 'button',
      'aria-pressed': 'false',
      onclick: () => {
        paused = !paused;
        pause.setAttribute('aria-pressed', String(paused));
        pause.textContent = paused ? 'Resume' : 'Pause';
        if (paused) {
          clearTimeout(timer);
          controller?.abort();
          setState(`paused after #${lastId}`);
        } else connect();
      },
    },
    'Pause',
  );

  const open = async () => {
    if (started) return;
    started = true;
    setState('reading the feed');
    let path: string | undefined = '/v1/events?limit=100';
    for (let page = 0; path && page < FEED_PAGES; page++) {
      const answer: { data: ApiEvent[]; next: string | undefined } = await call<ApiEvent[]>('GET', path);
      for (const event of answer.data) show(event);
      path = answer.next;
    }
    if (!paused) connect();
  };

  const section = h(
    'section',
    { 'aria-labelledby': 'events-h' },
    h('h2', { id: 'events-h' }, 'Events'),
    h(
      'div',
      { class: 'filters' },
      h('div', { class: 'field' }, h('label', { for: 'event-type' }, 'Show type'), filter),
      pause,
      h('span', {}, 'Stream: ', state),
    ),
    list,
  );
  return {
    section,
    open: () => act(open),
    stop: () => {
      clearTimeout(timer);
      controller?.abort();
    },
  };
}
