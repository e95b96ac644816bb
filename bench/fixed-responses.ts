/**
 * The fixed, pre-serialised answers of the two baseline targets (bench/reference-server.ts and
 * bench/fastify-floor.ts): a page of 20 pets with a `next` link, and one pet. Same shapes and sizes as
 * the service's answers, so the baselines do the same socket work the service does.
 */
import { samplePet } from '../src/domain/sample-pets.js';

const pet = (id: number) => {
  const { name, categoryId, status } = samplePet();
  return { id, name, categoryId: Number(categoryId), status };
};
const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const headers = (body: Buffer) => ({
  'content-type': 'application/json; charset=utf-8',
  'content-length': String(body.length),
});

export const page = json(Array.from({ length: 20 }, (_, i) => pet(1000 + i)));
export const one = json(pet(1000));
export const pageHeaders = {
  ...headers(page),
  link: '</v1/pets?limit=20&cursor=MTAyMDo.AAAAAAAAAAAAAAAAAAAAAA>; rel="next"',
};
export const oneHeaders = headers(one);
export const createdHeaders = { ...oneHeaders, location: '/v1/pets/1000' };
