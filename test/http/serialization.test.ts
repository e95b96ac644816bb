import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serializationKey } from '../../src/http/request/serialization.js';

const error = (description: string, example: string) => ({
  $ref: 'Error#',
  description,
  examples: [{ code: example, message: example, status: 400 }],
  'x-examples': { one: { value: example } },
});

test('when two response schemas differ only in descriptions and examples, then they share one serialiser', () => {
  assert.equal(serializationKey(error('No pet has this id', 'a')), serializationKey(error('Bad key', 'b')));
  assert.equal(serializationKey(error('x', 'y')), JSON.stringify({ $ref: 'Error#' }));
});

test('when schemas differ in what they serialise, then they do not share one, even where a property is named like an annotation', () => {
  const withProperty = (name: string) => ({
    type: 'object',
    properties: { [name]: { type: 'string', description: 'documented' } },
  });
  assert.notEqual(serializationKey(withProperty('description')), serializationKey(withProperty('title')));
  assert.equal(
    serializationKey(withProperty('description')),
    JSON.stringify({ type: 'object', properties: { description: { type: 'string' } } }),
  );
  // Values are data: an object in enum, const or default keeps every field, annotation-like or not.
  const withDefault = (title: string) => ({ type: 'object', default: { title } });
  assert.notEqual(serializationKey(withDefault('a')), serializationKey(withDefault('b')));
  assert.notEqual(
    serializationKey({ type: 'string', enum: ['a'] }),
    serializationKey({ type: 'string', enum: ['b'] }),
  );
  assert.notEqual(serializationKey({ type: 'integer' }), serializationKey({ type: 'string' }));
});
