import { createServer } from 'node:net';

/**
 * A port that was free a moment ago on 127.0.0.1: for a process that must listen on a port known in
 * advance (a worker listening again, a Redis started by the test), or for an address where nothing listens.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
    server.on('error', reject);
  });
}
