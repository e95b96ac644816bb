import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, backends, before, type TestDatabase, test } from '../support/backends.js';
import { jsonLines, poll, type ServeProcess, startServe, workerPids } from '../support/cli.js';
import { processHolding, TestStream } from '../support/event-stream.js';

interface Answer {
  status: number;
  text: string;
}

/**
 * One request on a connection of its own (no keep-alive agent): node:cluster hands each new connection
 * to the next worker, so successive calls land on different workers.
 */
function onNewConnection(url: string, method: string, key: string, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method,
      agent: false,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

for (const backend of backends) {
  backend.describe(`petstore serve --workers 2 (${backend.name})`, () => {
    let database: TestDatabase;
    let serve: ServeProcess;
    let url: string;

    before(async () => {
      database = await backend.create();
      // No PETSTORE_API_KEYS: the first start must create exactly one key, not one per worker.
      serve = await startServe({ DATABASE_URL: database.url, LOG_LEVEL: 'info' }, { workers: 2 });
      url = serve.url;
    });
    after(async () => {
      await serve?.kill();
      await database?.drop();
    });

    test('when requests arrive on new connections, then two worker processes on one port serve them', async () => {
      const workers = await workerPids(serve);
      assert.equal(new Set(workers).size, 2, 'two distinct workers listen');
      assert.ok(!workers.includes(serve.child.pid as number), 'the primary itself serves nothing');

      assert.equal(serve.stderr.match(/No API key existed/g)?.length, 1, 'one first key, printed once');
      const key = /^ {2}(pst_\S+)$/m.exec(serve.stderr)?.[1];
      assert.ok(key, serve.output());

      const ids: number[] = [];
      for (let i = 0; i < 6; i++) {
        const res = await onNewConnection(`${url}/v1/pets`, 'POST', key, { name: `w${i}`, categoryId: i });
        assert.equal(res.status, 201, res.text);
        ids.push((JSON.parse(res.text) as { id: number }).id);
      }
      assert.equal(new Set(ids).size, 6);
      const list = await onNewConnection(`${url}/v1/pets`, 'GET', key);
      assert.deepEqual(
        (JSON.parse(list.text) as { id: number }[]).map((pet) => pet.id),
        [...ids].sort((a, b) => a - b),
      );

      // Workers accept connections themselves (SCHED_NONE), so which one takes a connection is the
      // kernel's choice: concurrent connections until both have answered.
      const servedBy = await poll('request lines from both workers', async () => {
        await Promise.all(Array.from({ length: 10 }, () => onNewConnection(`${url}/v1/pets`, 'GET', key)));
        const pids = new Set(
          jsonLines(serve.stdout)
            .filter((line) => line.msg === 'request')
            .map((line) => line.pid as number),
        );
        return pids.size === 2 ? pids : undefined;
      });
      assert.deepEqual([...servedBy].sort(), [...workers].sort());
    });

    test('when /metrics is scraped, then every answer sums the counters of both workers, whichever worker answers', async () => {
      const key = /^ {2}(pst_\S+)$/m.exec(serve.stderr)?.[1] as string;
      // Each worker has served some of these (the first test made sure both serve).
      const creates = (text: string) =>
        Number(
          /^petstore_http_requests_total\{method="POST",route="\/v1\/pets",status="201"\} (\d+)$/m.exec(
            text,
          )?.[1],
        );
      const scrapes = await Promise.all(
        Array.from({ length: 6 }, () => onNewConnection(`${url}/metrics`, 'GET', key)),
      );
      for (const scrape of scrapes) {
        assert.equal(scrape.status, 200);
        assert.equal(creates(scrape.text), 6, 'the six creates of the first test, from both workers');
        // One build, however many workers: the info metric is 1, not their sum.
        assert.match(scrape.text, /^petstore_build_info\{version="[^"]+",node="v[^"]+"\} 1$/m);
      }
    });

    test('when started without REDIS_URL, then the primary warns that each worker has its own rate-limit budget', () => {
      const warnings = jsonLines(serve.stdout).filter((line) => line.level === 40);
      assert.equal(warnings.length, 1, serve.output());
      assert.equal(warnings[0]?.pid, serve.child.pid);
      assert.match(
        String(warnings[0]?.msg),
        /^without REDIS_URL each of the 2 workers keeps its own rate-limit buckets/,
      );
    });

    // One backend: the count is the HTTP layer's and the primary's alone.
    if (backend.name === 'sqlite')
      test("when one key opens 20 live streams on a node of two workers, then 10 open and 10 are 429: the bound is the node's, whichever worker a connection reaches", async () => {
        const key = /^ {2}(pst_\S+)$/m.exec(serve.stderr)?.[1] as string;
        const workers = await workerPids(serve);
        const streams = await poll('streams held by both workers', async () => {
          const round = await Promise.all(
            Array.from({ length: 20 }, () => TestStream.open(`${url}/v1/events?after=${2 ** 40}`, { key })),
          );
          const holders = new Set(
            round.filter((s) => s.status === 200).map((s) => processHolding(s.localPort as number, workers)),
          );
          if (holders.size === 2) return round;
          for (const stream of round) stream.close();
          await Promise.all(round.map((stream) => stream.ended));
          await new Promise((resolve) => setTimeout(resolve, 100)); // the workers hear of the closes
          return undefined;
        });
        const statuses = streams.map((s) => s.status);
        assert.equal(statuses.filter((status) => status === 200).length, 10, String(statuses));
        assert.equal(statuses.filter((status) => status === 429).length, 10, String(statuses));
        for (const stream of streams) stream.close();
        await Promise.all(streams.map((stream) => stream.ended));
        // Given back: once the closes are heard, the key opens 10 again.
        const again = await poll('the slots to come back', async () => {
          const round = await Promise.all(
            Array.from({ length: 10 }, () => TestStream.open(`${url}/v1/events?after=${2 ** 40}`, { key })),
          );
          if (round.every((s) => s.status === 200)) return round;
          for (const stream of round) stream.close();
          await Promise.all(round.map((stream) => stream.ended));
          return undefined;
        });
        for (const stream of again) stream.close();
      });

    test('when the primary gets SIGTERM, then every worker drains and it exits 0', async () => {
      const workers = await workerPids(serve);
      serve.signal('SIGTERM');
      const result = await serve.exitStatus();
      assert.equal(result.code, 0, serve.output());
      assert.deepEqual(workers.filter(isAlive), [], 'no worker outlives the primary');
    });
  });
}
