import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { after, backends, test } from '../support/backends.js';
import { killAllCliProcesses, lostConnection, type ServeProcess, startServe } from '../support/cli.js';
import { storedPets } from '../support/db-inspect.js';
import { walkLinks } from '../support/paging.js';
import { parseExact } from '../support/raw-json.js';

/**
 * DECISIONS.md: "A 201 means the pet is durably stored: it survives a crash of the process the instant
 * after." Concurrent creates run against a real `petstore serve` process; once `killAfter` of them have
 * been answered 201 the process gets SIGKILL while others are still in flight. A new process on the same
 * database must then show every pet answered 201, field for field, and no pet twice (each request
 * carries a unique name). Pets whose request was cut off may or may not be there, but if there, intact.
 */

const KEY = 'crash-test-key-0123456789abcdef';
const CONCURRENCY = 16;
const STATUSES = ['available', 'pending', 'sold'] as const;

interface SentPet {
  name: string;
  categoryId: string;
  status: string;
}
interface PetText extends SentPet {
  id: string;
}

after(() => killAllCliProcesses());

const asText = (pet: Record<string, unknown>): PetText => ({
  id: String(pet.id),
  name: pet.name as string,
  categoryId: String(pet.categoryId),
  status: pet.status as string,
});

async function serve(t: TestContext, url: string): Promise<ServeProcess> {
  const server = await startServe({
    DATABASE_URL: url,
    PETSTORE_API_KEYS: KEY,
    LOG_LEVEL: 'info',
    // This is about durability, not throttling: no rate limit, no load shedding (each has its own tests).
    RATE_LIMIT_PER_SECOND: '0',
    OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
  });
  t.after(() => server.kill());
  return server;
}

/** Every pet through the API, walking every page of the restarted service. */
async function listAll(url: string): Promise<PetText[]> {
  const pages = await walkLinks('/v1/pets?limit=100', async (path) => {
    const res = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${KEY}` } });
    return { status: res.status, headers: res.headers, text: await res.text() };
  });
  return pages.flatMap((page) => parseExact<Record<string, unknown>[]>(page.text).map(asText));
}

for (const backend of backends) {
  backend.describe(`crash durability (${backend.name})`, () => {
    for (const killAfter of [5, 50, 200]) {
      test(`when the server is killed with SIGKILL after ${killAfter} acknowledged concurrent creates, then after a restart every pet answered 201 is there intact and none twice`, async (t) => {
        const database = await backend.create();
        t.after(() => database.drop());
        const server = await serve(t, database.url);
        const run = `${backend.name}-${killAfter}-${Date.now().toString(36)}`;

        /** Every pet sent, by its unique name. */
        const sent = new Map<string, SentPet>();
        const acknowledged: PetText[] = [];
        /** Answers other than 201 (their pets must not be stored). */
        const refused: { name: string; status: number; body: string }[] = [];
        let killed = false;

        const workers = Array.from({ length: CONCURRENCY }, async (_, w) => {
          for (let i = 0; !killed; i++) {
            const pet: SentPet = {
              name: `crash ${run} ${w}-${i}`,
              // Values beyond 2^53 too: an int64 must survive the crash exactly.
              categoryId: String(9_007_199_254_740_993n + BigInt(w * 100_000 + i)),
              status: STATUSES[(w + i) % STATUSES.length] as string,
            };
            sent.set(pet.name, pet);
            let res: Response;
            let text: string;
            try {
              res = await fetch(`${server.url}/v1/pets`, {
                method: 'POST',
                headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
                body: `{"name":${JSON.stringify(pet.name)},"categoryId":${pet.categoryId},"status":"${pet.status}"}`,
              });
              text = await res.text();
            } catch (error) {
              // Only the kill ends a worker (the process is gone: this request's fate is unknown).
              if (killed && lostConnection(error)) return;
              throw error;
            }
            if (res.status !== 201) {
              refused.push({ name: pet.name, status: res.status, body: text });
              continue;
            }
            acknowledged.push(asText(parseExact(text)));
            if (acknowledged.length >= killAfter && !killed) {
              killed = true;
              server.signal('SIGKILL');
            }
          }
        });
        await Promise.all(workers);
        const exit = await server.exitStatus();
        assert.equal(exit.signal, 'SIGKILL');
        assert.ok(acknowledged.length >= killAfter, `only ${acknowledged.length} creates were acknowledged`);
        assert.deepEqual(refused, [], 'every create before the kill was answered 201');

        // Each acknowledged pet is what was sent, with an id of its own.
        for (const pet of acknowledged) {
          const { id: _id, ...fields } = pet;
          assert.deepEqual(fields, sent.get(pet.name));
        }
        assert.equal(new Set(acknowledged.map((p) => p.id)).size, acknowledged.length);

        const restarted = await serve(t, database.url);
        const stored = await listAll(restarted.url);
        const byId = new Map(stored.map((pet) => [pet.id, pet]));
        const lost = acknowledged.filter((pet) => JSON.stringify(byId.get(pet.id)) !== JSON.stringify(pet));
        assert.deepEqual(lost, [], 'pets answered 201 are missing or changed after the restart');

        // No pet twice, nothing that was never sent, and what is there is intact.
        assert.equal(new Set(stored.map((p) => p.name)).size, stored.length, 'a name is stored twice');
        assert.equal(new Set(stored.map((p) => p.id)).size, stored.length, 'an id is listed twice');
        for (const pet of stored) {
          const { id: _id, ...fields } = pet;
          assert.deepEqual(
            fields,
            sent.get(pet.name),
            `stored pet ${pet.id} is not one that was sent intact`,
          );
        }
        t.diagnostic(
          `${sent.size} creates sent, ${acknowledged.length} answered 201 before the kill, ${stored.length} stored`,
        );
        assert.ok(stored.length >= acknowledged.length);
        assert.ok(stored.length <= sent.size);

        // The database itself agrees with the API, row for row.
        assert.deepEqual(await storedPets(database.url), stored);

        // And the restarted service goes on: a new pet gets an id above every stored one.
        const next = await fetch(`${restarted.url}/v1/pets`, {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: `after ${run}`, categoryId: 1 }),
        });
        const nextText = await next.text();
        assert.equal(next.status, 201, nextText);
        const nextId = BigInt(asText(parseExact(nextText)).id);
        assert.ok(
          stored.every((pet) => BigInt(pet.id) < nextId),
          `new id ${nextId} is not above the stored ones`,
        );
      });
    }
  });
}
