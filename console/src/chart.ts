// Deliveries per minute and their lag over the last hour, drawn by hand in SVG. From the deliveries
// list (not /metrics, whose counters have no history): each delivery counts in the minute of its last
// attempt, and its lag is that attempt's time less its event's occurredAt (read from the feed, which
// needs events:read; without it only the counts are drawn).
import { call } from './api.js';
import { fill, h, svg } from './dom.js';
import type { Delivery } from './webhooks.js';

const MINUTES = 60;
const PAGES = 10;
const W = 600;
const H = 200;
const PAD = 30;

export async function drawChart(place: HTMLElement, deliveriesPath: string, withLag: boolean): Promise<void> {
  const now = Date.now();
  const start = now - MINUTES * 60_000;
  const recent: Delivery[] = [];
  let path: string | undefined = `${deliveriesPath}?limit=100`;
  for (let page = 0; path && page < PAGES; page++) {
    const answer: { data: Delivery[]; next: string | undefined } = await call<Delivery[]>('GET', path);
    const within = answer.data.filter((d) => d.lastAttemptAt && Date.parse(d.lastAttemptAt) >= start);
    recent.push(...within);
    // Newest event first: a page with nothing in the hour means the rest is older.
    path = within.length > 0 ? answer.next : undefined;
  }
  const occurred = new Map<number, number>();
  if (withLag && recent.length > 0) {
    const ids = recent.map((d) => d.eventId);
    const last = Math.max(...ids);
    let feed: string | undefined = `/v1/events?after=${Math.min(...ids) - 1}&limit=100`;
    for (let page = 0; feed && page < PAGES; page++) {
      const answer: { data: { id: number; occurredAt: string }[]; next: string | undefined } = await call<
        { id: number; occurredAt: string }[]
      >('GET', feed);
      for (const event of answer.data) occurred.set(event.id, Date.parse(event.occurredAt));
      feed = answer.data.some((e) => e.id >= last) ? undefined : answer.next;
    }
  }
  const counts = new Array<number>(MINUTES).fill(0);
  const lagSums = new Array<number>(MINUTES).fill(0);
  const lagCounts = new Array<number>(MINUTES).fill(0);
  for (const delivery of recent) {
    const at = Date.parse(delivery.lastAttemptAt as string);
    const minute = Math.min(MINUTES - 1, Math.floor((at - start) / 60_000));
    counts[minute] = (counts[minute] ?? 0) + 1;
    const then = occurred.get(delivery.eventId);
    if (then !== undefined) {
      lagSums[minute] = (lagSums[minute] ?? 0) + (at - then) / 1000;
      lagCounts[minute] = (lagCounts[minute] ?? 0) + 1;
    }
  }
  const lags = lagSums.map((sum, i) => (lagCounts[i] ? sum / (lagCounts[i] as number) : undefined));
  const maxCount = Math.max(1, ...counts);
  const maxLag = Math.max(0.001, ...lags.filter((l): l is number => l !== undefined));
  const x = (i: number) => PAD + (i * (W - 2 * PAD)) / MINUTES;
  const barWidth = (W - 2 * PAD) / MINUTES - 1;
  const y = (value: number, max: number) => H - PAD - (value / max) * (H - 2 * PAD);
  const points = lags
    .map((lag, i) => (lag === undefined ? undefined : `${x(i) + barWidth / 2},${y(lag, maxLag)}`))
    .filter(Boolean)
    .join(' ');
  const total = recent.length;
  const summary = `${total} deliveries in the last hour, at most ${maxCount === 1 && total === 0 ? 0 : maxCount} in a minute${
    withLag && points ? `; the largest mean lag in a minute ${maxLag.toFixed(2)} s` : ''
  }.`;
  fill(
    place,
    h('h4', { id: 'chart-h' }, 'Deliveries per minute and their lag, last hour'),
    svg(
      'svg',
      { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': 'chart-h chart-d', class: 'chart' },
      svg('desc', { id: 'chart-d' }, summary),
      svg('line', { x1: PAD, y1: H - PAD, x2: W - PAD, y2: H - PAD, class: 'axis' }),
      ...counts.map((count, i) =>
        svg('rect', {
          x: x(i),
          y: y(count, maxCount),
          width: barWidth,
          height: H - PAD - y(count, maxCount),
          class: 'bar',
        }),
      ),
      points && svg('polyline', { points, class: 'lag' }),
      svg('text', { x: PAD, y: H - 8, class: 'label' }, '−60 min'),
      svg('text', { x: W - PAD, y: H - 8, class: 'label', 'text-anchor': 'end' }, 'now'),
      svg('text', { x: PAD, y: 18, class: 'label' }, `bars: deliveries (max ${maxCount}/min)`),
      withLag &&
        svg(
          'text',
          { x: W - PAD, y: 18, class: 'label lag-label', 'text-anchor': 'end' },
          `line: mean lag (max ${maxLag.toFixed(2)} s)`,
        ),
    ),
    h('p', { class: 'chart-summary' }, summary),
  );
}
