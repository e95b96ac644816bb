import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { databaseLocation } from '../../src/storage/open-storage.js';

test('when DATABASE_URL is a relative sqlite: path, then the location is absolute, from the working directory', () => {
  assert.equal(databaseLocation('sqlite:./data/petstore.db'), resolve(process.cwd(), 'data/petstore.db'));
  assert.equal(databaseLocation('sqlite:/srv/petstore.db'), '/srv/petstore.db');
});

test('when DATABASE_URL is sqlite::memory:, then the location says the data goes with the process', () => {
  assert.equal(
    databaseLocation('sqlite::memory:'),
    'in memory (sqlite::memory:), gone when the process exits',
  );
});

test('when a PostgreSQL URL holds a password, then the location is the URL without it', () => {
  assert.equal(
    databaseLocation('postgres://petstore:s3cret@db.internal:5432/petstore?sslmode=require'),
    'postgres://petstore@db.internal:5432/petstore?sslmode=require',
  );
  assert.equal(
    databaseLocation('postgresql://db.internal/petstore?user=petstore&password=s3cret'),
    'postgresql://db.internal/petstore?user=petstore',
  );
});
