import assert from 'node:assert/strict';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { ERROR_STATUS, type ErrorCode } from '../../src/http/schemas/error.js';

type Json = Record<string, unknown>;
interface ErrorMedia {
  example?: { status: number };
  examples?: Record<string, { value: { status: number } }>;
}
interface Operation {
  responses: Record<
    string,
    { content?: Record<string, { schema: Json }>; headers?: Record<string, unknown> }
  >;
}

/**
 * The formats the document uses, as Ajv checks them. `date-time` is held to what DECISIONS.md promises
 * for `placedAt`, stricter than RFC 3339 alone: UTC (`Z`), and a real instant.
 */
export const CONTRACT_FORMATS = {
  int64: true,
  int32: true,
  'date-time': (text: string) =>
    /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/.test(text) && !Number.isNaN(Date.parse(text)),
} as const;

/**
 * Checks responses against the served OpenAPI document, so the document cannot drift from what the
 * service does: the status must be one the operation lists, the body must match its schema, and an
 * Error body's `status` must be the HTTP status.
 */
export class OpenApiContract {
  readonly #ajv = new Ajv2020({ strict: false, allErrors: true, formats: CONTRACT_FORMATS });
  readonly #doc: Json;
  readonly #routes: { method: string; pattern: RegExp; pointer: string; operation: Operation }[] = [];

  constructor(doc: Json) {
    this.#doc = doc;
    this.#ajv.addSchema(doc, 'openapi');
    const paths = doc.paths as Record<string, Record<string, Operation & { servers?: { url: string }[] }>>;
    for (const [path, item] of Object.entries(paths)) {
      for (const [method, operation] of Object.entries(item)) {
        const base = operation.servers?.[0]?.url.replace(/\/$/, '') ?? '/v1';
        const pattern = new RegExp(`^${base}${path.replace(/\{[^}]+\}/g, '[^/]+')}$`);
        const pointer = `/paths/${path.replaceAll('~', '~0').replaceAll('/', '~1')}/${method}`;
        this.#routes.push({ method: method.toUpperCase(), pattern, pointer, operation });
      }
    }
  }

  get document(): Json {
    return this.#doc;
  }

  /**
   * The statuses an operation may answer: the ones it lists, and the ones its `default` response
   * documents by example (each example's code, with that code's one status). A status in neither is a
   * drift, even though `default` would describe its body: `default` tells clients "any other error is an
   * Error body", it does not make every status documented.
   */
  static explicitStatuses(operation: Operation): Set<number> {
    const statuses = new Set<number>();
    for (const [key, response] of Object.entries(operation.responses)) {
      if (key !== 'default') {
        statuses.add(Number(key));
        continue;
      }
      // One code: the example of the media type; several: its named examples.
      const media = response.content?.['application/json'] as ErrorMedia | undefined;
      if (media?.example) statuses.add(media.example.status);
      for (const { value } of Object.values(media?.examples ?? {})) statuses.add(value.status);
    }
    return statuses;
  }

  /** Asserts that a response to `method path` is one the document describes. */
  check(method: string, path: string, status: number, contentType: string | null, body: string): void {
    const route = this.#routes.find(
      (r) => r.method === method && r.pattern.test(path.split('?')[0] as string),
    );
    if (!route) {
      // Not an operation of the document (unknown path, wrong method): still an Error body.
      if (status >= 400 && method !== 'HEAD') this.#validateError(body, status, `${method} ${path}`);
      return;
    }
    const statuses = OpenApiContract.explicitStatuses(route.operation);
    assert.ok(
      statuses.has(status),
      `${method} ${path} answered ${status}, which the OpenAPI document does not list for it ` +
        `(it lists ${[...statuses].join(', ')})`,
    );
    const key = String(status) in route.operation.responses ? String(status) : 'default';
    const content = route.operation.responses[key]?.content;
    if (!content || method === 'HEAD') return;
    if (!('application/json' in content)) {
      const mediaType = (contentType ?? '').split(';')[0] as string;
      assert.ok(mediaType in content, `${method} ${path}: ${contentType} is not a documented media type`);
      return;
    }
    assert.match(contentType ?? '', /^application\/json; charset=utf-8$/, `${method} ${path}: content type`);
    const escapedKey = key.replaceAll('~', '~0').replaceAll('/', '~1');
    this.#validate(
      `openapi#${route.pointer}/responses/${escapedKey}/content/application~1json/schema`,
      body,
      `${method} ${path} ${status}`,
    );
    if (status >= 400) this.#validateError(body, status, `${method} ${path}`);
  }

  /** An Error body, whose `status` is the HTTP status and whose `code` is the one that status carries. */
  #validateError(body: string, status: number, what: string): void {
    this.#validate('openapi#/components/schemas/Error', body, `${what} ${status}`);
    const error = JSON.parse(body) as { code: string; status: number };
    assert.equal(
      error.status,
      status,
      `${what}: the Error body says status ${error.status}, the HTTP status is ${status}`,
    );
    const expected = ERROR_STATUS[error.code as ErrorCode];
    assert.equal(expected, status, `${what}: the code ${error.code} travels with ${expected}, not ${status}`);
  }

  #validate(ref: string, body: string, what: string): void {
    const validate = this.#ajv.getSchema(ref) ?? this.#ajv.compile({ $ref: ref });
    const value = JSON.parse(body);
    assert.ok(
      validate(value),
      `${what}: body does not match the OpenAPI document: ${this.#ajv.errorsText(validate.errors)}\n${body}`,
    );
  }
}
