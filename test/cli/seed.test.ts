import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { PET_STATUSES } from '../../src/domain/pet.js';
import { openStorage } from '../../src/storage/open-storage.js';
import {
  killAllCliProcesses,
  migratedTempDatabase,
  runInProcess,
  type TempDatabase,
  tempDatabase,
} from '../support/cli.js';

describe('petstore seed', { concurrency: 4 }, () => {
  const databases: TempDatabase[] = [];
  after(() => {
    killAllCliProcesses();
    for (const database of databases) database.remove();
  });

  test('when seed --count 2500 --orders 0 runs, then 2500 plausible animals and no orders are added in batches with plain progress lines', async () => {
    const database = await migratedTempDatabase();
    databases.push(database);
    const result = await runInProcess(['seed', '--count', '2500', '--batch-size', '1000', '--orders', '0'], {
      DATABASE_URL: database.url,
    });
    assert.equal(result.code, 0, result.stderr);
    // Not a terminal: plain lines, never a carriage return, ending on the total.
    assert.ok(!result.stderr.includes('\r'));
    assert.match(
      result.stderr.trim().split('\n').at(-1) ?? '',
      /^seeding: 2500 of 2500 animals \(100%\), 0 orders$/,
    );

    const storage = await openStorage({
      databaseUrl: database.url,
      databasePoolSize: 1,
      databaseTimeoutMs: 5_000,
    });
    try {
      assert.equal(await storage.pets.count(), 2500);
      const pets = await storage.pets.list({ afterId: 0n, limit: 2500 });
      for (const pet of pets) {
        assert.match(pet.name, /^[A-Z][a-z]+ the [a-z ]+$/);
        assert.ok(pet.categoryId >= 1n && pet.categoryId <= 12n);
        assert.ok(PET_STATUSES.includes(pet.status));
      }
      assert.equal(new Set(pets.map((pet) => pet.status)).size, 3, 'every status occurs');
      assert.equal(await storage.orders.count(), 0);
    } finally {
      await storage.close();
    }
  });

  test('when seed runs with order shares, then that share of the animals is ordered, orders are placed, delivered and cancelled as asked, and each ordered animal has the status its order implies', async () => {
    const database = await migratedTempDatabase();
    databases.push(database);
    const result = await runInProcess(
      [
        'seed',
        '--count',
        '2000',
        '--batch-size',
        '700',
        '--orders',
        '0.5',
        '--delivered',
        '0.5',
        '--cancelled',
        '0.25',
      ],
      { DATABASE_URL: database.url },
    );
    assert.equal(result.code, 0, result.stderr);
    const storage = await openStorage({
      databaseUrl: database.url,
      databasePoolSize: 1,
      databaseTimeoutMs: 5_000,
    });
    try {
      const orders = await storage.orders.list({ afterId: 0n, limit: 2000 });
      assert.match(result.stderr.trim().split('\n').at(-1) ?? '', new RegExp(`, ${orders.length} orders$`));
      // Drawn at random: 1000 expected, far from either bound.
      assert.ok(orders.length > 850 && orders.length < 1150, `${orders.length} orders`);
      const inStatus = (status: string) => orders.filter((order) => order.status === status).length;
      assert.ok(inStatus('delivered') > orders.length * 0.4, 'about half delivered');
      assert.ok(inStatus('cancelled') > orders.length * 0.15, 'about a quarter cancelled');
      assert.ok(inStatus('placed') > orders.length * 0.15, 'the rest placed');
      assert.equal(new Set(orders.map((order) => order.petId)).size, orders.length, 'one order per animal');
      const implied = { placed: 'pending', delivered: 'sold', cancelled: 'available' };
      for (const order of orders) {
        assert.equal(
          (await storage.pets.findById(order.petId))?.status,
          implied[order.status],
          `order ${order.id}`,
        );
      }
      assert.equal(await storage.events.count(), 0, 'seeding records no events');
    } finally {
      await storage.close();
    }
  });

  for (const [args, message] of [
    [['--orders', '1.5'], /orders.*expected a share from 0 to 1/],
    [['--delivered', '0.7', '--cancelled', '0.5'], /--delivered and --cancelled add up to more than 1/],
  ] as const) {
    test(`when seed is run with ${args.join(' ')}, then it exits non-zero with one line saying why`, async () => {
      const database = tempDatabase();
      databases.push(database);
      const result = await runInProcess(['seed', ...args], { DATABASE_URL: database.url });
      assert.notEqual(result.code, 0);
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
      assert.match(result.stderr, message);
    });
  }

  for (const bad of ['0', 'abc', '-5', '1.5']) {
    test(`when --count is ${bad}, then it exits non-zero with one line saying why`, async () => {
      const database = tempDatabase();
      databases.push(database);
      const result = await runInProcess(['seed', '--count', bad], { DATABASE_URL: database.url });
      assert.notEqual(result.code, 0);
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
      assert.match(result.stderr, /count.*expected an integer from 1 to 100000000/);
    });
  }
});

describe('petstore command errors', () => {
  for (const args of [['frobnicate'], ['keys', 'frob'], ['keys', 'list', '--bogus']]) {
    test(`when run as petstore ${args.join(' ')}, then it exits non-zero with one line naming the mistake`, async () => {
      const result = await runInProcess(args, { DATABASE_URL: 'sqlite::memory:' });
      assert.notEqual(result.code, 0);
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
      assert.match(result.stderr, /^error: unknown (command|option) '(frobnicate|frob|--bogus)'/);
    });
  }
});
