/**
 * The service a user would otherwise write by hand: Express + better-sqlite3, the same three operations
 * (list, get, create) with the same authentication (SHA-256 of the bearer key, looked up among the
 * configured keys, else in the api_keys table), the same validation rules and the same SQL, on the same
 * database file the service was seeded into (WAL, synchronous=FULL). What it leaves out is what such a
 * service usually leaves out: no request log, no metrics, no request ids, no idempotency keys, no group
 * commit (one commit per create), numbers as JavaScript numbers (ids beyond 2^53 would be rounded).
 *
 *   tsx bench/express-baseline.ts <port> <sqlite file>     (keys from PETSTORE_API_KEYS)
 */
import { hash, randomBytes } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { CursorCodec } from '../src/domain/paging.js';
import { NewPet } from '../src/http/schemas/pet.js';
import { BetterSqlite3 } from '../src/storage/sqlite/driver.js';

const port = Number(process.argv[2]);
const db = new BetterSqlite3(process.argv[3] as string);
db.pragma('busy_timeout = 5000');
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');

const configured = new Set(
  (process.env.PETSTORE_API_KEYS ?? '')
    .split(',')
    .filter(Boolean)
    .map((key) => hash('sha256', key, 'hex')),
);
const keyByHash = db.prepare('SELECT id FROM api_keys WHERE hash = ? AND revoked_at IS NULL');
const byId = db.prepare('SELECT id, name, category_id AS categoryId, status FROM pets WHERE id = ?');
const page = db.prepare(
  'SELECT id, name, category_id AS categoryId, status FROM pets WHERE id > ? ORDER BY id LIMIT ?',
);
const pageByStatus = db.prepare(
  'SELECT id, name, category_id AS categoryId, status FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?',
);
const insert = db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING id');
const cursors = new CursorCodec(randomBytes(32));

const STATUSES = new Set(['available', 'pending', 'sold']);
const INT64 = /^[1-9][0-9]{0,18}$/;
const MAX_INT64 = 2n ** 63n - 1n;
// The contract's pattern for a name, as the JSON Schema states it (Ajv compiles it with the u flag).
const NAME = new RegExp((NewPet.properties.name as unknown as { pattern: string }).pattern, 'u');

const fail = (res: Response, status: number, code: string, message: string) =>
  res.status(status).json({ error: { code, message } });

const app = express();
app.disable('x-powered-by');
app.disable('etag');

app.use('/v1', (req: Request, res: Response, next: NextFunction) => {
  const match = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(req.headers.authorization ?? '');
  const token = match?.[1];
  if (!token || token.length > 512) return fail(res, 401, 'unauthorized', 'the API key is not valid');
  const keyHash = hash('sha256', token, 'hex');
  if (!configured.has(keyHash) && keyByHash.get(keyHash) === undefined)
    return fail(res, 401, 'unauthorized', 'the API key is not valid');
  next();
});

app.get('/v1/pets', (req: Request, res: Response) => {
  const { limit: limitText = '20', status, cursor, ...rest } = req.query as Record<string, string>;
  if (Object.keys(rest).length > 0) return fail(res, 400, 'invalid_request', 'unknown parameter');
  const limit = Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100)
    return fail(res, 400, 'invalid_request', 'limit must be an integer from 1 to 100');
  if (status !== undefined && !STATUSES.has(status))
    return fail(res, 400, 'invalid_request', 'status must be one of available, pending, sold');
  let afterId = 0n;
  if (cursor !== undefined) {
    try {
      afterId = cursors.decode(cursor, { status: status as never }).afterId;
    } catch {
      return fail(res, 400, 'invalid_request', 'cursor is not valid');
    }
  }
  const rows = (status ? pageByStatus.all(status, afterId, limit + 1) : page.all(afterId, limit + 1)) as {
    id: number;
  }[];
  if (rows.length > limit) {
    rows.length = limit;
    const next = cursors.encode({
      afterId: BigInt((rows[limit - 1] as { id: number }).id),
      status: status as never,
    });
    res.set(
      'Link',
      `</v1/pets?limit=${limit}${status ? `&status=${status}` : ''}&cursor=${next}>; rel="next"`,
    );
  }
  res.json(rows);
});

app.get('/v1/pets/:petId', (req: Request, res: Response) => {
  const petId = req.params.petId as string;
  if (!INT64.test(petId) || BigInt(petId) > MAX_INT64)
    return fail(res, 400, 'invalid_request', 'petId must be an integer from 1 to 2^63-1');
  const pet = byId.get(BigInt(petId));
  if (!pet) return fail(res, 404, 'not_found', 'no animal has this id');
  res.json(pet);
});

app.post('/v1/pets', express.json({ limit: '64kb' }), (req: Request, res: Response) => {
  const body = req.body as Record<string, unknown> | undefined;
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return fail(res, 400, 'invalid_request', 'the body must be a JSON object');
  const { name, categoryId, status = 'available', ...rest } = body;
  if (Object.keys(rest).length > 0) return fail(res, 400, 'invalid_request', 'unknown property');
  if (typeof name !== 'string' || [...name].length < 1 || [...name].length > 255 || !NAME.test(name))
    return fail(res, 400, 'invalid_request', 'name must be 1 to 255 characters, not blank');
  if (typeof categoryId !== 'number' || !Number.isSafeInteger(categoryId))
    return fail(res, 400, 'invalid_request', 'categoryId must be an integer');
  if (typeof status !== 'string' || !STATUSES.has(status))
    return fail(res, 400, 'invalid_request', 'status must be one of available, pending, sold');
  const { id } = insert.get(name, categoryId, status) as { id: number };
  res.status(201).location(`/v1/pets/${id}`).json({ id, name, categoryId, status });
});

app.listen(port, '127.0.0.1');
