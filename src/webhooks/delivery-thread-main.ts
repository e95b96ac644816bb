// The delivery thread's entry (delivery-thread.ts starts it): the thread's work is serveDeliveries, on
// its port to the node. Nothing else lives here, as nothing here can be measured in process.
import { parentPort, workerData } from 'node:worker_threads';
import type { DeliveryThreadData } from './delivery-thread.js';
import { serveDeliveries } from './serve-deliveries.js';

if (!parentPort) throw new Error('delivery-thread-main.ts runs as a worker thread (delivery-thread.ts)');
await serveDeliveries(parentPort, workerData as DeliveryThreadData);
