/**
 * Preloaded (node --import) by bench/profile.ts: counts the async resources the process creates, by
 * type (PROMISE, TickObject, TCPWRAP, …), and on SIGUSR2 writes the counts so far, as JSON, to the file
 * COUNT_ASYNC_FILE names (written aside then renamed, so a reader never sees half of it). The hook
 * itself costs CPU: a process that counts is not one whose CPU is measured.
 */
import { createHook } from 'node:async_hooks';
import { renameSync, writeFileSync } from 'node:fs';

const counts = Object.create(null);
createHook({
  init(_asyncId, type) {
    counts[type] = (counts[type] ?? 0) + 1;
  },
}).enable();

const file = process.env.COUNT_ASYNC_FILE;
if (file) {
  process.on('SIGUSR2', () => {
    // Synchronous: answering must not itself create the resources it counts.
    writeFileSync(`${file}.tmp`, JSON.stringify(counts));
    renameSync(`${file}.tmp`, file);
  });
}
