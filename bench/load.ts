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
