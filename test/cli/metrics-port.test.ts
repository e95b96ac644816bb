import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import {
  jsonLines,
  killAllCliProcesses,
  poll,
  type ServeProcess,
  startServe,
  type TempDatabase,
  tempDatabase,
  workerPids,
} from '../support/cli.js';
import { freePort } from '../support/free-port.js';
import { TEST_KEY } from '../support/test-server.js';

after(killAllCliProcesses);

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One request on a connection of its own: under --workers successive calls reach different workers. */
function onNewConnection(url: string, method = 'GET', key: string | null = TEST_KEY): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method,
      agent: false,
      headers: key === null ? {} : { authorization: `Bearer ${key}` },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.end();
  });
}

/** Every sample of a Prometheus text exposition: `name{labels}` to its value. */
function samples(text: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    found.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return found;
}

/** The names of the metrics of a type (`counter`, `histogram`…), from the exposition's TYPE lines. */
function metricsOfType(text: string, type: string): string[] {
  return [...text.matchAll(new RegExp(`^# TYPE (\\S+) ${type}$`, 'gm'))].map((match) => match[1] as string);
}

const NOT_FOUND = { code: 'not_found', message: 'no resource at this address', status: 404 };

describe('METRICS_PORT on a single process', () => {
  let database: TempDatabase;
  let serve: ServeProcess;
  let metricsUrl: string;

  before(async () => {
    database = tempDatabase();
    const port = await freePort();
    metricsUrl = `http://127.0.0.1:${port}`;
    serve = await startServe({
      DATABASE_URL: database.url,
      PETSTORE_API_KEYS: TEST_KEY,
      METRICS_PORT: String(port),
    });
  });
  after(async () => {
    await serve.kill();
    database.remove();
  });

  test('when METRICS_PORT is set, then /metrics is served there, counting the API, and the API port answers 404 for it', async () => {
    assert.equal((await onNewConnection(`${serve.url}/v1/pets`)).status, 200);
    const scrape = await onNewConnection(`${metricsUrl}/metrics`, 'GET', null);
    assert.equal(scrape.status, 200);
    assert.equal(scrape.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
    assert.equal(
      samples(scrape.text).get('petstore_http_requests_total{method="GET",route="/v1/pets",status="200"}'),
      1,
    );
    assert.ok((samples(scrape.text).get('petstore_process_start_time_seconds') ?? 0) > 0);

    const onApi = await onNewConnection(`${serve.url}/metrics`, 'GET', null);
    assert.equal(onApi.status, 404);
    assert.deepEqual(JSON.parse(onApi.text), NOT_FOUND);
    // The API's own document no longer lists it.
    const document = JSON.parse((await onNewConnection(`${serve.url}/v1/openapi.json`)).text);
    assert.equal(document.paths['/metrics'], undefined);
    assert.match(
      jsonLines(serve.stdout)
        .map((line) => String(line.msg))
        .join('\n'),
      new RegExp(`^metrics listening at ${metricsUrl}/metrics$`, 'm'),
    );
  });

  test('when anything but GET /metrics is asked of the metrics port, then it answers 404 (or 405 with Allow) with the Error body', async () => {
    for (const path of ['/', '/v1/pets', '/healthz', '/metrics/x']) {
      const res = await onNewConnection(`${metricsUrl}${path}`, 'GET', null);
      assert.equal(res.status, 404, path);
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      assert.deepEqual(JSON.parse(res.text), NOT_FOUND);
    }
    const post = await onNewConnection(`${metricsUrl}/metrics`, 'POST', null);
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET, HEAD');
    assert.deepEqual(JSON.parse(post.text), {
      code: 'method_not_allowed',
      message: 'GET /metrics only',
      status: 405,
    });
  });
});

describe('serve --workers 2 with METRICS_PORT, with a worker killed', () => {
  let database: TempDatabase;
  let serve: ServeProcess;
  let metricsUrl: string;

  before(async () => {
    database = tempDatabase();
    const port = await freePort();
    metricsUrl = `http://127.0.0.1:${port}`;
    serve = await startServe(
      { DATABASE_URL: database.url, PETSTORE_API_KEYS: TEST_KEY, METRICS_PORT: String(port) },
      { workers: 2 },
    );
  });
  after(async () => {
    await serve.kill();
    database.remove();
  });

  test('when a worker is killed, then no counter goes back, process_max_fds is one process figure, start time is there and memory is per worker', async () => {
    const [first, second] = await workerPids(serve);
    // Traffic on both workers: concurrent new connections until both have answered some.
    await poll('requests answered by both workers', async () => {
      await Promise.all(Array.from({ length: 10 }, () => onNewConnection(`${serve.url}/v1/pets`)));
      const pids = new Set(
        jsonLines(serve.stdout)
          .filter((line) => line.msg === 'request')
          .map((line) => line.pid),
      );
      return pids.size === 2 ? true : undefined;
    });
    const onApi = await onNewConnection(`${serve.url}/metrics`, 'GET', null);
    assert.equal(onApi.status, 404, 'the workers do not serve /metrics on the API port');
    assert.deepEqual(JSON.parse(onApi.text), NOT_FOUND);

    const beforeText = (await onNewConnection(`${metricsUrl}/metrics`, 'GET', null)).text;
    const before = samples(beforeText);
    const listed = 'petstore_http_requests_total{method="GET",route="/v1/pets",status="200"}';
    assert.ok((before.get(listed) ?? 0) >= 10, beforeText);

    process.kill(first as number, 'SIGKILL');
    await poll('a replacement to listen', () => {
      const pids = jsonLines(serve.stdout)
        .filter((line) => String(line.msg).startsWith('Server listening at'))
        .map((line) => line.pid as number);
      return pids.length >= 3 ? true : undefined;
    });
    const afterText = (await onNewConnection(`${metricsUrl}/metrics`, 'GET', null)).text;
    const after = samples(afterText);

    // Every sample of every counter and histogram is at least what it was before the death.
    const monotonic = [...metricsOfType(beforeText, 'counter'), ...metricsOfType(beforeText, 'histogram')];
    assert.ok(monotonic.includes('petstore_http_requests_total'), monotonic.join(', '));
    let compared = 0;
    for (const [series, value] of before) {
      const name = series.split('{')[0] as string;
      if (!monotonic.some((metric) => name === metric || name.startsWith(`${metric}_`))) continue;
      compared++;
      assert.ok((after.get(series) ?? -1) >= value, `${series}: ${value} before, ${after.get(series)} after`);
    }
    assert.ok(compared > 50, `${compared} counter samples compared`);
    assert.ok((after.get(listed) ?? 0) >= (before.get(listed) ?? 0));

    // One process's limit, not the sum of two.
    const limit = Number(
      /^Max open files\s+(\d+)/m.exec(readFileSync(`/proc/${second}/limits`, 'utf8'))?.[1],
    );
    assert.equal(after.get('petstore_process_max_fds'), limit);
    // The primary's start: when the counters it keeps began, before any worker's.
    const start = after.get('petstore_process_start_time_seconds') as number;
    assert.ok(start > 0 && start <= Date.now() / 1000, afterText);
    assert.equal(before.get('petstore_process_start_time_seconds'), start, 'it does not move with a worker');
    // Resident memory is one figure per worker (the slot, kept by a replacement), never summed.
    assert.equal(after.get('petstore_process_resident_memory_bytes'), undefined);
    for (const worker of ['1', '2']) {
      assert.ok(
        (after.get(`petstore_process_resident_memory_bytes{worker="${worker}"}`) ?? 0) > 0,
        afterText,
      );
    }
    // One build, however many workers.
    assert.match(afterText, /^petstore_build_info\{version="[^"]+",node="v[^"]+"\} 1$/m);
  });

  test('when the primary logs, then its lines are JSON on stdout with the fields of the workers’ lines (the database it opened among them), and stderr holds nothing', async () => {
    const lines = jsonLines(serve.stdout);
    const primary = lines.filter((line) => line.pid === serve.child.pid);
    assert.ok(primary.some((line) => line.msg === `2 workers listening on ${serve.url}`));
    assert.ok(primary.some((line) => line.msg === `metrics listening at ${metricsUrl}/metrics`));
    const worker = lines.find((line) => line.pid !== serve.child.pid) as Record<string, unknown>;
    for (const line of primary) {
      for (const field of ['level', 'time', 'pid', 'hostname', 'msg']) {
        assert.ok(field in line && field in worker, `${field} in ${JSON.stringify(line)}`);
      }
    }
    assert.ok(primary.some((line) => line.msg === `database: ${database.path}`));
    // Every line is JSON: a log pipeline parses the whole output.
    assert.equal(serve.stderr, '');
  });
});
