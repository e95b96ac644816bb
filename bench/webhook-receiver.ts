/**
 * The delivery-lag scenario's receiver, in a process of its own so that its answers wait on nothing
 * else (bench/delivery-lag.ts paces creates from its own process): it answers each POST 204 at once and
 * notes, per pet created, the milliseconds from the event's occurredAt to its arrival. `GET /received`
 * answers how many arrived; `GET /lags` the noted lags, as [petId, ms] pairs.
 */
import { createServer } from 'node:http';

const port = Number(process.argv[2]);
const lags = new Map<number, number>();
let received = 0;

createServer((req, res) => {
  if (req.method === 'GET') {
    const body = req.url === '/lags' ? JSON.stringify([...lags]) : JSON.stringify({ received });
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const arrived = Date.now();
    const { occurredAt, data } = JSON.parse(Buffer.concat(chunks).toString()) as {
      occurredAt: string;
      data: { id: number };
    };
    received += 1;
    lags.set(data.id, arrived - Date.parse(occurredAt));
    res.writeHead(204).end();
  });
}).listen(port, '127.0.0.1');
