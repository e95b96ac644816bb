/**
 * The benchmark's reference target: a bare node:http server answering the service's URLs with fixed,
 * pre-serialised bytes. Whatever the service does beyond this (routing, auth, validation, the database,
 * serialisation, logging) is what the ratio to it measures; this is the runtime's ceiling on the machine.
 *
 *   tsx bench/reference-server.ts <port>
 */
import { createServer } from 'node:http';
import { samplePet } from '../src/domain/sample-pets.js';

const port = Number(process.argv[2]);
const pet = (id: number) => {
  const { name, categoryId, status } = samplePet();
  return { id, name, categoryId: Number(categoryId), status };
};
const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const page = json(Array.from({ length: 20 }, (_, i) => pet(1000 + i)));
const one = json(pet(1000));
const headers = (body: Buffer) => ({
  'content-type': 'application/json; charset=utf-8',
  'content-length': String(body.length),
});
const pageHeaders = {
  ...headers(page),
  link: '</v1/pets?limit=20&cursor=MTAyMDo.AAAAAAAAAAAAAAAAAAAAAA>; rel="next"',
};
const oneHeaders = headers(one);

createServer((request, response) => {
  if (request.method === 'POST') {
    // Read the body as the service must, then answer.
    request.on('data', () => undefined);
    request.on('end', () => {
      response.writeHead(201, { ...oneHeaders, location: '/v1/pets/1000' });
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
