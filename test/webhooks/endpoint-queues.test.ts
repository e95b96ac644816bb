import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ClaimedDelivery } from '../../src/domain/webhooks.js';
import {
  type EndpointQueue,
  EndpointQueues,
  MAX_HELD,
  MAX_IN_FLIGHT,
} from '../../src/webhooks/endpoint-queues.js';

/**
 * The per-endpoint queues of claimed deliveries on their own: what is held, the bounds on starting
 * (per endpoint and in all), expired leases, how deep each endpoint is leased ahead, and idle endpoints
 * forgotten past a few hundred.
 */

const LEASED_UNTIL = 10_000;

function claimed(endpointId: number, eventId: number, leaseUntil = LEASED_UNTIL): ClaimedDelivery {
  return {
    endpointId: BigInt(endpointId),
    eventId: BigInt(eventId),
    attempts: 0,
    trigger: 'schedule',
    url: `http://127.0.0.1:9/${endpointId}`,
    secrets: ['secret'],
    body: '{}',
    eventType: 'pet.created',
    cause: undefined,
    occurredAt: new Date(0),
    leaseUntil: new Date(leaseUntil),
  };
}

/** Takes what may start, as the deliverer does: each counted as under way before the next is taken. */
function start(queues: EndpointQueues, latestLeaseEnd = 0, expired: ClaimedDelivery[] = []): string[] {
  const started: string[] = [];
  for (const [delivery, queue] of queues.startable(latestLeaseEnd, expired)) {
    queue.active += 1;
    queues.sending += 1;
    started.push(`${delivery.endpointId}/${delivery.eventId}`);
  }
  return started;
}

/** The queue objects as `startable` hands them out, by endpoint (taking, and counting nothing). */
function queuesOf(queues: EndpointQueues): Map<bigint, EndpointQueue> {
  const found = new Map<bigint, EndpointQueue>();
  const taken: ClaimedDelivery[] = [];
  for (const [delivery, queue] of queues.startable(0, [])) {
    found.set(delivery.endpointId, queue);
    taken.push(delivery);
  }
  queues.add(taken);
  queues.held -= taken.length;
  return found;
}

describe('EndpointQueues', () => {
  test('when deliveries are added, then they are held and the room left shrinks by as many', () => {
    const queues = new EndpointQueues(2, 1_000);
    assert.equal(queues.held, 0);
    assert.equal(queues.room(), MAX_HELD);
    assert.equal(MAX_HELD, 2048);
    queues.add([claimed(1, 1), claimed(2, 2), claimed(1, 3)]);
    assert.equal(queues.held, 3);
    assert.equal(queues.room(), 2045);
    queues.add([]);
    assert.equal(queues.held, 3);
  });

  test('when deliveries of several endpoints are queued, then they start endpoint by endpoint in order, each with its own queue', () => {
    const queues = new EndpointQueues(4, 1_000);
    queues.add([claimed(1, 1), claimed(2, 2), claimed(1, 3), claimed(2, 4)]);
    const seen: [string, EndpointQueue][] = [];
    for (const [delivery, queue] of queues.startable(0, [])) seen.push([String(delivery.eventId), queue]);
    assert.deepEqual(
      seen.map(([id]) => id),
      ['1', '3', '2', '4'],
    );
    assert.equal(seen[0]?.[1], seen[1]?.[1], 'one queue per endpoint');
    assert.notEqual(seen[1]?.[1], seen[2]?.[1]);
    assert.deepEqual(seen[0]?.[1], { queued: [], active: 0, latencyMs: undefined, depth: 0 });
    assert.equal(queues.held, 4, 'started ones are still held until recorded');
  });

  test('when an endpoint has perEndpoint attempts under way, then no more of its deliveries start, and the next endpoint goes on', () => {
    const queues = new EndpointQueues(2, 1_000);
    queues.add([claimed(1, 1), claimed(1, 2), claimed(1, 3), claimed(2, 4), claimed(2, 5)]);
    assert.deepEqual(start(queues), ['1/1', '1/2', '2/4', '2/5']);
    assert.deepEqual(start(queues), [], 'both endpoints at their bound');
    const [first] = queuesOf(queues).values();
    assert.equal(first, undefined, 'nothing startable to hand out');
  });

  test('when an attempt ends, then the next of its endpoint starts', () => {
    const queues = new EndpointQueues(1, 1_000);
    queues.add([claimed(1, 1), claimed(1, 2)]);
    let running: EndpointQueue | undefined;
    for (const [, queue] of queues.startable(0, [])) {
      queue.active += 1;
      queues.sending += 1;
      running = queue;
    }
    assert.ok(running);
    assert.equal(running.queued.length, 1);
    running.active -= 1;
    queues.sending -= 1;
    assert.deepEqual(start(queues), ['1/2']);
  });

  test('when MAX_IN_FLIGHT attempts are waiting for their answer, then nothing more starts, whatever the endpoint', () => {
    assert.equal(MAX_IN_FLIGHT, 64);
    const queues = new EndpointQueues(1_000, 1_000);
    queues.add(Array.from({ length: 70 }, (_, i) => claimed(1, i)));
    queues.add([claimed(2, 100)]);
    assert.equal(start(queues).length, 64);
    assert.equal(queues.sending, 64);
    queues.sending = 63;
    assert.deepEqual(start(queues), ['1/64'], 'one slot, one start');
  });

  test('when a lease ends at or before the latest lease end, then it goes to expired and is no longer held, and the next starts', () => {
    const queues = new EndpointQueues(1, 1_000);
    queues.add([claimed(1, 1, 500), claimed(1, 2, 499), claimed(1, 3, 501), claimed(1, 4, 502)]);
    const expired: ClaimedDelivery[] = [];
    assert.deepEqual(start(queues, 500, expired), ['1/3']);
    assert.deepEqual(
      expired.map((delivery) => delivery.eventId),
      [1n, 2n],
    );
    assert.equal(queues.held, 2, 'the two expired are let go, the started and the queued one held');
    assert.equal(queues.room(), MAX_HELD - 2);
  });

  test('when no attempt time is known, then no depth is given; once it is, as many as answer within the lease margin, between perEndpoint and 512', () => {
    const queues = new EndpointQueues(2, 1_000);
    queues.add([claimed(1, 1), claimed(2, 2), claimed(3, 3), claimed(4, 4), claimed(5, 5)]);
    const found = queuesOf(queues);
    assert.deepEqual(queues.depths(), new Map());
    queues.paced(found.get(1n) as EndpointQueue, 10); // 2 * 1000 / 10
    queues.paced(found.get(2n) as EndpointQueue, 1); // 2000: at most 512
    queues.paced(found.get(3n) as EndpointQueue, 5_000); // 0.4: at least 2
    queues.paced(found.get(4n) as EndpointQueue, 0); // taken as 1 ms
    queues.paced(found.get(5n) as EndpointQueue, 300); // 6.67, rounded down
    assert.deepEqual(
      queues.depths(),
      new Map([
        [1n, 200],
        [2n, 512],
        [3n, 2],
        [4n, 512],
        [5n, 6],
      ]),
    );
    assert.equal(found.get(1n)?.depth, 200, 'the depth is kept on the queue');
    assert.equal(found.get(3n)?.depth, 2);
  });

  test('when an endpoint answers in under a millisecond, then its depth is reckoned at 1 ms', () => {
    const queues = new EndpointQueues(1, 100);
    queues.add([claimed(1, 1)]);
    const queue = queuesOf(queues).get(1n) as EndpointQueue;
    queues.paced(queue, 0.5);
    assert.deepEqual(queues.depths(), new Map([[1n, 100]]));
  });

  test('when attempts take time, then the recent attempt time starts at the first and moves a fifth of the way to each next', () => {
    const queues = new EndpointQueues(2, 1_000);
    queues.add([claimed(1, 1)]);
    const queue = queuesOf(queues).get(1n) as EndpointQueue;
    assert.equal(queue.latencyMs, undefined);
    queues.paced(queue, 100);
    assert.equal(queue.latencyMs, 100);
    queues.paced(queue, 200);
    assert.equal(queue.latencyMs, 120);
    queues.paced(queue, 20);
    assert.equal(queue.latencyMs, 100);
  });

  test('when fewer are queued than perEndpoint or half the depth, then the queue is low', () => {
    const queues = new EndpointQueues(2, 1_000);
    const queue: EndpointQueue = { queued: [claimed(1, 1)], active: 0, latencyMs: undefined, depth: 0 };
    assert.equal(queues.low(queue), true, '1 < 2');
    queue.queued.push(claimed(1, 2));
    assert.equal(queues.low(queue), false, '2 is not < 2');
    queue.depth = 10;
    assert.equal(queues.low(queue), true, '2 < 5');
    queue.queued.push(claimed(1, 3), claimed(1, 4));
    assert.equal(queues.low(queue), true, '4 < 5');
    queue.queued.push(claimed(1, 5));
    assert.equal(queues.low(queue), false, '5 is not < 5');
  });

  test('when drained, then every queued delivery is taken out, endpoint by endpoint, and none starts after', () => {
    const queues = new EndpointQueues(1, 1_000);
    queues.add([claimed(1, 1), claimed(1, 2), claimed(2, 3), claimed(1, 4)]);
    assert.deepEqual(start(queues), ['1/1', '2/3']);
    assert.deepEqual(
      queues.drain().map((delivery) => delivery.eventId),
      [2n, 4n],
    );
    assert.deepEqual(queues.drain(), []);
    for (const queue of queuesOf(queues).values()) assert.fail(`nothing queued, yet ${queue.queued.length}`);
  });

  test('when more than 256 endpoints are remembered, then an idle one is forgotten with its pace, and a busy one is kept', () => {
    const queues = new EndpointQueues(1, 1_000);
    queues.add(Array.from({ length: 258 }, (_, i) => claimed(i + 1, i + 1)));
    const paced = new Set<bigint>();
    for (const [delivery, queue] of queues.startable(0, [])) {
      queues.paced(queue, 1_000);
      paced.add(delivery.endpointId);
      // The first stays under way; the others are answered at once (idle again).
      if (delivery.endpointId === 1n) queue.active = 1;
    }
    assert.equal(paced.size, 258);
    const depths = queues.depths();
    assert.equal(depths.size, 256, 'two forgotten, down to 256');
    assert.equal(depths.has(1n), true, 'the busy one is kept');
    assert.equal(depths.has(2n), false);
    assert.equal(depths.has(3n), false);
    assert.equal(depths.has(4n), true);
  });

  test('when 256 endpoints or fewer are remembered, then idle ones keep their pace', () => {
    const queues = new EndpointQueues(1, 1_000);
    queues.add(Array.from({ length: 256 }, (_, i) => claimed(i + 1, i + 1)));
    for (const [, queue] of queues.startable(0, [])) queues.paced(queue, 1_000);
    assert.equal(queues.depths().size, 256);
  });

  test('when endpoints still have deliveries queued, then none is forgotten, however many', () => {
    const queues = new EndpointQueues(1, 1_000);
    queues.add(Array.from({ length: 258 }, (_, i) => claimed(i + 1, i + 1)));
    queues.sending = MAX_IN_FLIGHT;
    assert.deepEqual(start(queues), [], 'no slot in all');
    queues.sending = 0;
    assert.equal([...queues.startable(0, [])].length, 258);
  });
});
