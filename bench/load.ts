/**
 * The load generator, run as its own process so it does not share an event loop with the orchestrator:
 * reads a LoadSpec as JSON from argv[2], drives autocannon against 127.0.0.1 for the given seconds and
 * prints autocannon's result as JSON on stdout.
 */
import autocannon from 'autocannon';
import type { LoadSpec } from './scenarios.js';

const spec = JSON.parse(process.argv[2] as string) as LoadSpec;
if (new URL(spec.url).hostname !== '127.0.0.1') throw new Error('load goes to 127.0.0.1 only');

let sequence = 0;
const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T;
/** Each create gets a distinct body, as real clients' would be. */
const body = () => {
  sequence++;
  return `{"name":"bench ${process.pid} ${sequence}","categoryId":${sequence % 1000},"status":"${pick(['available', 'pending', 'sold'])}"}`;
};

/**
 * The ids of available animals, for `place` traffic: listed page by page before the load starts (at
 * most enough for the run), then each ordered once, in id order. A run that outlasts them wraps round,
 * and its later orders are answered 409: it says so on stderr.
 */
async function availablePets(max: number): Promise<number[]> {
  const ids = new Set<number>();
  let path: string | undefined = '/v1/pets?status=available&limit=100';
  for (let pages = 0; path !== undefined && ids.size < max && pages < max / 100; pages++) {
    const res: Response = await fetch(`${spec.url}${path}`, {
      headers: { authorization: `Bearer ${spec.key}` },
    });
    for (const pet of (await res.json()) as { id: number }[]) ids.add(pet.id);
    path = /^<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
  }
  return [...ids];
}
const orderable = spec.mix.some((part) => part.kind === 'place') ? await availablePets(60_000) : [];
let ordered = 0;
const orderBody = () => {
  if (ordered === orderable.length)
    process.stderr.write(
      `load: each of the ${orderable.length} available animals listed was ordered; the rest of the run orders them again (a service answers 409)\n`,
    );
  return `{"petId":${orderable[ordered++ % Math.max(1, orderable.length)]}}`;
};

const result = await autocannon({
  url: spec.url,
  connections: spec.connections,
  duration: spec.seconds,
  headers: { authorization: `Bearer ${spec.key}` },
  requests: [
    {
      setupRequest: (request) => {
        const roll = Math.random() * 100;
        const mix = spec.mix.find((part) => (part.upTo ?? 100) > roll) ?? (spec.mix[0] as LoadSpec['mix'][0]);
        if (mix.kind === 'place') {
          return {
            ...request,
            method: 'POST',
            path: '/v1/store/orders',
            headers: { ...request.headers, 'content-type': 'application/json' },
            body: orderBody(),
          };
        }
        if (mix.kind === 'create') {
          return {
            ...request,
            method: 'POST',
            path: '/v1/pets',
            headers: { ...request.headers, 'content-type': 'application/json' },
            body: body(),
          };
        }
        return { ...request, method: 'GET', path: pick(mix.paths), body: undefined };
      },
    },
  ],
});
process.stdout.write(JSON.stringify(result));
