import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CLOCK_TICKS, statCpuMicros } from '../../bench/processes.js';
import {
  cpuByGroup,
  parseGcTrace,
  parseRouteHooks,
  parseStraceSummary,
  summariseGcs,
  threadSample,
} from '../../bench/profile-parse.js';

const tick = 1e6 / CLOCK_TICKS;

test('a /proc stat line gives utime + stime, counted after the command even when it holds ") "', () => {
  const line =
    '14076 (node) S 14000 14076 14000 0 -1 4194560 20374 0 1 0 250 31 0 0 20 0 11 0 7342 1143083008 15325 18446744073709551615';
  assert.equal(statCpuMicros(line), 281 * tick);
  const odd = '77 (a) (b) c) R 1 77 77 0 -1 4194304 10 0 0 0 7 3 0 0 20 0 1 0 99 1000 10 1';
  assert.equal(statCpuMicros(odd), 10 * tick);
});

test('a stat line that is not one gives nothing', () => {
  assert.equal(statCpuMicros(''), undefined);
  assert.equal(statCpuMicros('no parentheses here 1 2 3'), undefined);
  assert.equal(statCpuMicros('14076 (node) S 14000 14076'), undefined, 'cut short');
  assert.equal(statCpuMicros('14076 (node) S 1 2 3 4 5 6 7 8 9 10 x y 0 0'), undefined, 'not numbers');
  assert.equal(threadSample(5, 'garbage', 'node\n'), undefined);
  assert.deepEqual(threadSample(5, '5 (node) S 1 2 3 4 5 6 7 8 9 10 4 6 0', 'libuv-pool\n'), {
    tid: 5,
    name: 'libuv-pool',
    cpuMicros: 10 * tick,
  });
});

test('CPU by thread group: the main thread by tid, the others summed by name, a newborn thread from 0', () => {
  const before = [
    { tid: 10, name: 'node', cpuMicros: 1000 },
    { tid: 11, name: 'v8-platform', cpuMicros: 100 },
    { tid: 12, name: 'v8-platform', cpuMicros: 50 },
    { tid: 13, name: 'libuv-pool', cpuMicros: 0 },
  ];
  const after = [
    { tid: 10, name: 'node', cpuMicros: 6000 },
    { tid: 11, name: 'v8-platform', cpuMicros: 300 },
    { tid: 12, name: 'v8-platform', cpuMicros: 150 },
    { tid: 13, name: 'libuv-pool', cpuMicros: 0 },
    { tid: 14, name: 'node', cpuMicros: 40 },
  ];
  assert.deepEqual(cpuByGroup(10, before, after), {
    main: 5000,
    'v8-platform': 300,
    'libuv-pool': 0,
    node: 40,
  });
});

const MiB = 2 ** 20;

test('--trace-gc lines are found among JSON log lines; a malformed one is counted, not taken', () => {
  const output = [
    '{"level":30,"time":1764200000000,"pid":14076,"msg":"Server listening at http://127.0.0.1:4000"}',
    '[14076:0x6a2b0c0]      231 ms: Scavenge 4.1 (4.2) -> 3.7 (5.2) MB, 1.67 / 0.01 ms  (average mu = 1.000, current mu = 1.000) allocation failure; ',
    '{"level":30,"reqId":"a","res":{"statusCode":200},"msg":"request completed"}',
    '[14076:0x6a2b0c0]      464 ms: Mark-Compact 21.2 (53.6) -> 3.1 (37.0) MB, 3.21 / 0.00 ms  (+ 2.1 ms in 20 steps since start of marking, biggest step 0.3 ms, walltime since start of marking 6 ms) (average mu = 1.000, current mu = 1.000) finalize incremental marking via task; GC in old space requested',
    // A log line written at the same moment, in front of V8's.
    '{"level":30,"msg":"x"}[14076:0x6a2b0c0]      500 ms: Mark-Compact (reduce) 5.0 (8.0) -> 4.0 (8.0) MB, 1.50 / 0.00 ms  (average mu = 0.9) low memory notification',
    // V8 12's format.
    '[1:0x5f0]       20 ms: Scavenge (interleaved) 3.8 (4.0) -> 3.4 (5.0) MB, pooled: 0 MB, 0.98 / 0.00 ms (average mu = 1.000, current mu = 1.000) allocation failure;',
    '[1:0x5f0]       25 ms: Minor Mark-Compact 3.9 (5.0) -> 1.1 (5.0) MB, pooled: 0 MB, 0.51 / 0.00 ms (average mu = 1.000',
    '[14076:0x6a2b0c0]      600 ms: Scavenge 4.1 (4.2) -> ',
    '[14076:0x6a2b0c0]      700 ms: Memory reducer: started',
    'ms: Scavenge 1 (2) -> 1 (2) MB, 1 / 0 ms',
    '',
  ].join('\n');
  const { events, unparsed } = parseGcTrace(output);
  assert.deepEqual(
    events.map((event) => [
      event.kind,
      event.at,
      event.heapBefore / MiB,
      event.heapAfter / MiB,
      event.pauseMs,
    ]),
    [
      ['scavenge', 231, 4.1, 3.7, 1.67],
      ['mark-compact', 464, 21.2, 3.1, 3.21],
      ['mark-compact', 500, 5, 4, 1.5],
      ['scavenge', 20, 3.8, 3.4, 0.98],
      ['minor-mark-compact', 25, 3.9, 1.1, 0.51],
    ],
  );
  assert.equal(unparsed, 2, 'the cut line and the memory reducer');
});

test('bytes allocated: each GC heap-before minus the previous GC heap-after, from the one before the window', () => {
  const gc = (kind: 'scavenge' | 'mark-compact', before: number, after: number) => ({
    kind,
    at: 0,
    heapBefore: before * MiB,
    heapAfter: after * MiB,
    pauseMs: 0.5,
  });
  const previous = gc('scavenge', 10, 4);
  const window = [gc('scavenge', 12, 5), gc('scavenge', 13, 6), gc('mark-compact', 20, 3)];
  assert.deepEqual(summariseGcs(previous, window), {
    scavenges: 2,
    markCompacts: 1,
    minorMarkCompacts: 0,
    pauseMs: 1.5,
    allocatedBytes: (8 + 8 + 14) * MiB,
  });
  // Without a GC before the window, the first one's allocation is unknown and left out.
  assert.equal(summariseGcs(undefined, window).allocatedBytes, (8 + 14) * MiB);
  assert.equal(summariseGcs(previous, []).allocatedBytes, 0);
});

test('strace -c: calls and errors by syscall, the total and the rest of its output skipped', () => {
  const table = `strace: Process 13376 attached with 11 threads
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 93.61    0.190998          98      1943        57 futex
  3.55    0.007236           7       938           epoll_pwait
  0.74    0.001518           3       389           write
  0.57    0.001162           2       485        12 read
  0.00    0.000004           4         1           getpid
  0.00    0.000000           0         3           pread64 extra
  garbage line
------ ----------- ----------- --------- --------- ----------------
100.00    0.204027          50      4067        69 total
strace: Process 13376 detached
`;
  assert.deepEqual(parseStraceSummary(table), {
    futex: { calls: 1943, errors: 57 },
    epoll_pwait: { calls: 938, errors: 0 },
    write: { calls: 389, errors: 0 },
    read: { calls: 485, errors: 12 },
    getpid: { calls: 1, errors: 0 },
  });
  assert.deepEqual(parseStraceSummary(''), {});
});

test("printRoutes' tree: each route's hooks by phase, under its full path and each of its methods", () => {
  const tree = `└── /
    ├── healthz (GET, HEAD)
    │   • (onRequest) ["anonymous()"]
    └── v1/
        ├── openapi.json (GET)
        │   • (onRequest) ["anonymous()"]
        │   • (preParsing) ["anonymous()","anonymous()"]
        └── pets (GET)
            • (onRequest) ["anonymous()","onRequest()","anonymous()","anonymous()","onRequest()"]
            • (preParsing) ["anonymous()","anonymous()"]
            • (preValidation) ["anonymous()"]
            • (onSend) ["anonymous()","tagAndCheck()","onSend()","tagCoding()"]
            • (onResponse) ["anonymous()"]
            pets (POST)
            • (onRequest) ["anonymous()","onRequest()"]
            • (onSend) [not json
            • (onResponse) ["anonymous()"]
            └── /:petId (GET)
                • (preValidation) ["preValidation()"]
                • (onSend) ["anonymous()","tagAndCheck()","onSend()","onSend()","tagCoding()"]
`;
  const routes = parseRouteHooks(tree);
  assert.deepEqual(Object.keys(routes).sort(), [
    'GET /healthz',
    'GET /v1/openapi.json',
    'GET /v1/pets',
    'GET /v1/pets/:petId',
    'HEAD /healthz',
    'POST /v1/pets',
  ]);
  assert.deepEqual(routes['GET /v1/pets'], {
    onRequest: ['anonymous()', 'onRequest()', 'anonymous()', 'anonymous()', 'onRequest()'],
    preParsing: ['anonymous()', 'anonymous()'],
    preValidation: ['anonymous()'],
    onSend: ['anonymous()', 'tagAndCheck()', 'onSend()', 'tagCoding()'],
    onResponse: ['anonymous()'],
  });
  assert.deepEqual(routes['POST /v1/pets'], {
    onRequest: ['anonymous()', 'onRequest()'],
    onResponse: ['anonymous()'],
  });
  assert.deepEqual(routes['GET /v1/pets/:petId'], {
    preValidation: ['preValidation()'],
    onSend: ['anonymous()', 'tagAndCheck()', 'onSend()', 'onSend()', 'tagCoding()'],
  });
  assert.deepEqual(routes['HEAD /healthz'], { onRequest: ['anonymous()'] });
});
