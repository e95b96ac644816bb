import assert from 'node:assert/strict';
import { after, backends, before, test } from '../support/backends.js';
import { createPets, cycleStatus, type PetBody, walkPages } from '../support/paging.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

/**
 * Another client that keeps adding pets until stopped. `waitForMore` lets the walker make sure at least
 * one pet was added between two of its pages, so the overlap is guaranteed rather than left to timing.
 */
class ConcurrentCreator {
  readonly created: PetBody[] = [];
  #stopped = false;
  #finished = false;
  #waiters: (() => void)[] = [];
  readonly #loops: Promise<void>[];

  constructor(server: TestServer, clients: number, maxPets: number) {
    this.#loops = Array.from({ length: clients }, (_, client) => this.#loop(server, client, maxPets));
    void Promise.allSettled(this.#loops).then(() => {
      this.#finished = true;
      this.#wake();
    });
  }

  async #loop(server: TestServer, client: number, maxPets: number): Promise<void> {
    for (let i = 0; !this.#stopped && this.created.length < maxPets; i++) {
      const res = await server.request('POST', '/v1/pets', {
        body: { name: `concurrent-${client}-${i}`, categoryId: 1000 + i, status: cycleStatus(i + client) },
      });
      assert.equal(res.status, 201, res.text);
      this.created.push(res.json<PetBody>());
      this.#wake();
    }
  }

  #wake(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }

  /** Resolves once at least one more pet has been created than now (or the creator has finished). */
  async waitForMore(): Promise<void> {
    const target = this.created.length + 1;
    while (this.created.length < target && !this.#finished) {
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
  }
}

function assertWalk(pages: PetBody[][], initial: PetBody[], during: PetBody[]): void {
  const seen = pages.flat();
  const seenIds = seen.map((pet) => pet.id);
  // No pet twice, and ascending id order across pages.
  assert.equal(new Set(seenIds).size, seenIds.length, 'a pet was seen twice');
  for (let i = 1; i < seenIds.length; i++) {
    assert.ok((seenIds[i] as number) > (seenIds[i - 1] as number), `ids not ascending at ${i}: ${seenIds}`);
  }
  // Every pet that existed when the walk began: seen exactly once, as it was created.
  const initialIds = new Set(initial.map((pet) => pet.id));
  assert.deepEqual(
    seen.filter((pet) => initialIds.has(pet.id)),
    initial,
  );
  // Nothing else but the pets created meanwhile, as they were created.
  const duringById = new Map(during.map((pet) => [pet.id, pet]));
  for (const pet of seen.filter((p) => !initialIds.has(p.id))) {
    assert.deepEqual(pet, duringById.get(pet.id), `pet ${pet.id} was never created`);
  }
}

for (const backend of backends) {
  backend.describe(`paging walk under concurrent creation (${backend.name})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ backend });
    });
    after(() => server.close());

    test('when pets are created while a client follows the next links with limit 7, then every pet that existed at the start is seen exactly once', async () => {
      const initial = await createPets(server, 60, cycleStatus, 'initial');
      const creator = new ConcurrentCreator(server, 3, 500);
      let pages: PetBody[][];
      try {
        pages = await walkPages(server, '/v1/pets?limit=7', () => creator.waitForMore());
      } finally {
        await creator.stop();
      }
      // 60 pets in pages of 7: at least 9 pages, and at least one creation between any two of them.
      assert.ok(pages.length >= 9, `only ${pages.length} pages`);
      assert.ok(
        creator.created.length >= pages.length - 1,
        `${creator.created.length} pets created during a walk of ${pages.length} pages`,
      );
      assert.ok(
        pages.slice(0, -1).every((page) => page.length === 7),
        'every page but the last is full',
      );
      assertWalk(pages, initial, creator.created);
    });

    test('when pets are created while a client follows the next links of a status filter, then every matching pet that existed at the start is seen exactly once', async () => {
      const added = await createPets(server, 45, cycleStatus, 'filtered');
      const listed = await server.request('GET', '/v1/pets?limit=100&status=pending');
      assert.equal(listed.status, 200);
      const initial = listed.json<PetBody[]>();
      // Every pending pet in the store: the ones from the first test and this one's.
      assert.ok(initial.length >= 15);
      assert.deepEqual(
        added.filter((pet) => pet.status === 'pending'),
        initial.slice(-15),
      );
      const creator = new ConcurrentCreator(server, 2, 500);
      let pages: PetBody[][];
      try {
        pages = await walkPages(server, '/v1/pets?limit=7&status=pending', () => creator.waitForMore());
      } finally {
        await creator.stop();
      }
      assert.ok(creator.created.length >= pages.length - 1);
      assert.ok(pages.flat().every((pet) => pet.status === 'pending'));
      assertWalk(
        pages,
        initial,
        creator.created.filter((pet) => pet.status === 'pending'),
      );
    });
  });
}
