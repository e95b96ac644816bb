/**
 * The benchmark's reference target: a bare node:http server answering the service's URLs with fixed,
 * pre-serialised bytes. Whatever the service does beyond this (routing, auth, validation, the database,
 * serialisation, logging) is what the ratio to it measures; this is the runtime's ceiling on the machine.
 *
 *   tsx bench/reference-server.ts <port>
 */
import { createServer } from 'node:http';
import { createdHeaders, one, oneHeaders, page, pageHeaders } from './fixed-responses.js';

const port = Number(process.argv[2]);

createServer((request, response) => {
  if (request.method === 'POST') {
    // Read the body as the service must, then answer.
    request.on('data', () => undefined);
    request.on('end', () => {
      response.writeHead(201, createdHeaders);
      response.end(one);
    });
    return;
  }
  if (request.url?.startsWith('/v1/pets/')) {
    response.writeHead(200, oneHeaders);
    response.end(one);
  } else {
    response.writeHead(200, pageHeaders);
    response.end(page);
  }
}).listen(port, '127.0.0.1');
