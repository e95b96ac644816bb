/**
 * Every benchmark tool `npm run bench -- <name>` starts (bench/main.ts), and the scenarios it may name
 * alone. Loading a tool runs it, so this module only says how: a test holds bench/README.md to it.
 */
import { SCENARIOS } from './scenarios.js';

export const TOOLS: Record<string, { measures: string; run: () => Promise<unknown> }> = {
  run: {
    measures:
      'every scenario: the service against the reference, the Fastify floor and Express (the default)',
    run: () => import('./run.js'),
  },
  profile: { measures: "where the service's CPU per request goes", run: () => import('./profile.js') },
  'side-by-side': {
    measures: 'builds or settings loaded at the same moment, as multiples of the floor',
    run: () => import('./side-by-side.js'),
  },
  'create-request-path': {
    measures: "a create's CPU on the request path, with one webhook endpoint against none",
    run: () => import('./create-request-path.js'),
  },
  'delivery-cost': {
    measures: 'what one delivery costs a --role deliver process',
    run: () => import('./delivery-cost.js'),
  },
  'event-stream': {
    measures: "the live event stream's latency across nodes, and what idle streams cost a read",
    run: () => import('./event-stream.js'),
  },
  capacity: {
    measures: "the capacity model's costs, on a primary and a streaming replica",
    run: () => import('./capacity.js'),
  },
  'write-ceiling': {
    measures: "the event-order lock's ceiling on PostgreSQL writes, from 1, 2 and 4 nodes",
    run: () => import('./write-ceiling.js'),
  },
  'pg-drivers': { measures: 'the PostgreSQL drivers compared', run: () => import('./pg-drivers.js') },
  'sse-parsers': {
    measures: "the client's stream reader against eventsource-parser bare",
    run: () => import('./sse-parsers.js'),
  },
  'storage-boundary': {
    measures: 'the wrappers around a storage call: four layers, two, one',
    run: () => import('./storage-boundary.js'),
  },
};
/** Scenarios of bench/run.ts that may be named alone. */
export const RUN_SCENARIOS: readonly string[] = [...SCENARIOS, 'delivery-lag'];
