/**
 * Preloaded (node --import) by bench/profile.ts: names this process's threads, as Node 20 leaves them
 * all "node", so that their CPU can be told apart in /proc/<pid>/task/<tid>/comm. The threads that wake
 * up to serve a burst of fs.stat calls are libuv's threadpool ("libuv-pool"); the others present now,
 * but the main one, are the V8 platform's workers (concurrent GC, compilation) and its delayed-task
 * scheduler, and the inspector's signal thread ("v8-platform"). Threads started later keep "node".
 */
import { readdirSync, readFileSync, stat, writeFileSync } from 'node:fs';

const tids = () => readdirSync('/proc/self/task').map(Number);
const switches = (tid) =>
  Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(readFileSync(`/proc/self/task/${tid}/status`, 'utf8'))?.[1]);
/** The threads that a burst of threadpool work woke up. */
async function woken() {
  const before = new Map(tids().map((tid) => [tid, switches(tid)]));
  await Promise.all(Array.from({ length: 64 }, () => new Promise((resolve) => stat('/', resolve))));
  return new Set(tids().filter((tid) => switches(tid) > (before.get(tid) ?? -1)));
}
// Twice: a V8 worker that happened to wake during one burst (a compile, a GC task) is not taken for libuv's.
const first = await woken();
const second = await woken();
for (const tid of tids()) {
  if (tid === process.pid) continue;
  const name = first.has(tid) && second.has(tid) ? 'libuv-pool' : 'v8-platform';
  try {
    // A thread may rename any thread of its own process.
    writeFileSync(`/proc/self/task/${tid}/comm`, name);
  } catch {
    // not Linux, or the thread ended: it keeps its name
  }
}
