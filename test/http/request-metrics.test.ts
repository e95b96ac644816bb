import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { DURATION_BUCKETS, RequestMetrics } from '../../src/http/observability/request-metrics.js';

/** The same answers, recorded by RequestMetrics and by prom-client's own labelled counter and histogram. */
function both(answers: [string, string, number, number][]) {
  const ours = new Registry();
  const metrics = new RequestMetrics(ours);
  const theirs = new Registry();
  const labelNames = ['method', 'route', 'status'];
  const requests = new Counter({
    name: 'petstore_http_requests_total',
    help: 'HTTP requests answered, by method, route template and status.',
    labelNames,
    registers: [theirs],
  });
  const duration = new Histogram({
    name: 'petstore_http_request_duration_seconds',
    help: 'Time from request received to response sent, by method, route template and status.',
    labelNames,
    buckets: DURATION_BUCKETS,
    registers: [theirs],
  });
  for (const [method, route, status, seconds] of answers) {
    metrics.record(method, route, status, seconds);
    const labels = { method, route, status: String(status) };
    requests.inc(labels);
    duration.observe(labels, seconds);
  }
  return { ours, theirs, metrics };
}

// Durations on each side of every bound, on a bound exactly, past the last bound, and zero.
const ANSWERS: [string, string, number, number][] = [
  ...DURATION_BUCKETS.flatMap((bound): [string, string, number, number][] => [
    ['GET', '/v1/pets/:petId', 200, bound],
    ['GET', '/v1/pets/:petId', 200, bound * 0.9],
    ['GET', '/v1/pets', 200, bound * 1.1],
  ]),
  ['GET', '/v1/pets/:petId', 404, 0],
  ['POST', '/v1/pets', 201, 7.5],
  ['GET', 'unmatched', 404, 0.0001],
  ['GET', '/v1/pets', 401, 0.0003],
];

describe('request metrics (petstore_http_requests_total, petstore_http_request_duration_seconds)', () => {
  test('when answers are recorded, then the scrape text is exactly what prom-client writes for the same observations', async () => {
    const { ours, theirs } = both(ANSWERS);
    const text = await ours.metrics();
    assert.equal(text, await theirs.metrics());
    assert.match(
      text,
      /petstore_http_requests_total\{method="GET",route="\/v1\/pets\/:petId",status="200"\} 24/,
    );
    assert.match(
      text,
      /petstore_http_request_duration_seconds_bucket\{le="0.0005",method="GET",route="\/v1\/pets\/:petId",status="200"\} 2/,
    );
    assert.match(
      text,
      /petstore_http_request_duration_seconds_bucket\{le="\+Inf",method="POST",route="\/v1\/pets",status="201"\} 1/,
    );
  });

  test('when nothing was answered, then both metrics are there with their help and type and no series', async () => {
    const { ours, theirs } = both([]);
    assert.equal(await ours.metrics(), await theirs.metrics());
    assert.match(await ours.metrics(), /# TYPE petstore_http_request_duration_seconds histogram/);
  });

  test('when the JSON of several workers is aggregated (serve --workers), then the sums are those of prom-client', async () => {
    const first = both(ANSWERS);
    const second = both(ANSWERS.slice(0, 10));
    const aggregate = async (registries: Registry[]) =>
      AggregatorRegistry.aggregate(await Promise.all(registries.map((r) => r.getMetricsAsJSON()))).metrics();
    const text = await aggregate([first.ours, second.ours]);
    assert.equal(text, await aggregate([first.theirs, second.theirs]));
    assert.match(
      text,
      /petstore_http_requests_total\{method="GET",route="\/v1\/pets\/:petId",status="200"\} 31/,
    );
  });

  test('when the registry is reset, then the series start again from nothing', async () => {
    const { ours, metrics } = both(ANSWERS);
    ours.resetMetrics();
    metrics.record('GET', '/v1/pets', 200, 0.001);
    const text = await ours.metrics();
    assert.match(text, /petstore_http_requests_total\{method="GET",route="\/v1\/pets",status="200"\} 1\n/);
    assert.doesNotMatch(text, /status="404"/);
  });
});
