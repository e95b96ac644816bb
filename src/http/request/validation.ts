import { Ajv, type ErrorObject, type SchemaObject, type SchemaValidateFunction } from 'ajv';
import type { FastifySchemaCompiler } from 'fastify';
import { INT64_MAX, INT64_MIN } from '../../domain/pet.js';

/**
 * Request validation. Ajv, configured for the contract rather than Fastify's defaults:
 * - no type coercion in bodies (docs/api.md: `"1"` is not an integer) and no silent removal of
 *   unknown properties (a typo must be refused, not dropped);
 * - integers are checked exactly, as bigints, so int64 values beyond 2^53 are neither rounded nor let
 *   through out of range. Ajv's own `integer` type cannot do this (it sees doubles), so every
 *   `type: integer` schema is validated by the `exactInteger` keyword below instead. The schemas
 *   themselves, and so the OpenAPI document, keep the plain `type: integer`.
 */

/** The annotation a schema uses to explain its `pattern` in words, for error messages. */
export const PATTERN_MESSAGE = 'x-pattern-message';
/** The annotation an `anyOf` schema uses to say in words what it takes, instead of one sentence per branch. */
export const ANY_OF_MESSAGE = 'x-any-of-message';

interface ExactIntegerSpec {
  int64: boolean;
  minimum?: bigint;
  maximum?: bigint;
}

const INTEGER_TEXT = /^-?(0|[1-9][0-9]*)$/;

/** `fromText`: query and path values arrive as text; digits-only text is read as an integer. */
function exactInteger(spec: ExactIntegerSpec, fromText: boolean, data: unknown): bigint | string {
  let value: bigint;
  if (typeof data === 'bigint') value = data;
  else if (typeof data === 'number' && Number.isSafeInteger(data)) value = BigInt(data);
  else if (fromText && typeof data === 'string' && data.length <= 40 && INTEGER_TEXT.test(data)) {
    value = BigInt(data);
  } else return 'must be an integer';
  const minimum = spec.minimum ?? (spec.int64 ? INT64_MIN : undefined);
  const maximum = spec.maximum ?? (spec.int64 ? INT64_MAX : undefined);
  if (minimum !== undefined && value < minimum) return `must be at least ${minimum}`;
  if (maximum !== undefined && value > maximum) return `must be at most ${maximum}`;
  return value;
}

function createAjv(fromText: boolean): Ajv {
  const ajv = new Ajv({
    allErrors: true, // name every offending field, not just the first
    coerceTypes: false,
    useDefaults: true,
    removeAdditional: false,
    verbose: true, // errors carry their schema, for PATTERN_MESSAGE
    strict: true,
    strictTypes: false,
    // Documented formats, checked by each schema's own pattern (date-time: RFC3339_PATTERN).
    formats: { int32: true, int64: true, 'date-time': true },
  });
  ajv.addKeyword({ keyword: PATTERN_MESSAGE, schemaType: 'string' });
  ajv.addKeyword({ keyword: ANY_OF_MESSAGE, schemaType: 'string' });
  const check: SchemaValidateFunction = (spec: ExactIntegerSpec, data: unknown, _schema, ctx) => {
    const result = exactInteger(spec, fromText, data);
    if (typeof result === 'string') {
      check.errors = [{ keyword: 'exactInteger', message: result, params: {} }];
      return false;
    }
    // Hand the handler the exact value: a bigint for int64, a number otherwise.
    if (ctx?.parentData !== undefined)
      ctx.parentData[ctx.parentDataProperty] = spec.int64 ? result : Number(result);
    return true;
  };
  ajv.addKeyword({ keyword: 'exactInteger', modifying: true, errors: true, validate: check });
  return ajv;
}

/** Replaces each `type: integer` (with its format and bounds) by the exactInteger keyword. */
export function withExactIntegers(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withExactIntegers);
  if (schema === null || typeof schema !== 'object') return schema;
  const source = schema as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(source)) {
    out[key] = key === 'enum' || key === 'const' || key === 'default' ? value : withExactIntegers(value);
  }
  if (source.type !== 'integer') return out;
  const { type: _t, format, minimum, maximum, ...rest } = out;
  const spec: ExactIntegerSpec = { int64: format === 'int64' };
  if (typeof minimum === 'number') spec.minimum = BigInt(minimum);
  if (typeof maximum === 'number') spec.maximum = BigInt(maximum);
  return { ...rest, exactInteger: spec };
}

/**
 * The validator compiler for every route: bodies are JSON (integers already exact from the body
 * parser), params and querystrings are text.
 */
export function createValidatorCompiler(
  sharedSchemas: readonly SchemaObject[],
): FastifySchemaCompiler<unknown> {
  const forBodies = createAjv(false);
  const forText = createAjv(true);
  for (const shared of sharedSchemas) {
    forBodies.addSchema(withExactIntegers(shared) as SchemaObject);
    forText.addSchema(withExactIntegers(shared) as SchemaObject);
  }
  // Compiled once per distinct schema: many routes share theirs (a petId, an empty query), and
  // compiling is most of what building the app costs.
  const compiled = new Map<string, ReturnType<Ajv['compile']>>();
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? forBodies : forText;
    const id = (schema as SchemaObject).$id;
    const known = id && ajv.getSchema(id);
    if (known) return known;
    const key = `${ajv === forBodies ? 'body' : 'text'} ${JSON.stringify(schema)}`;
    let validate = compiled.get(key);
    if (!validate) {
      validate = ajv.compile(withExactIntegers(schema) as SchemaObject);
      compiled.set(key, validate);
    }
    return validate;
  };
}

/** How many unknown properties (or parameters) a 400 names before it only counts the rest. */
const UNKNOWN_NAMED = 5;

/**
 * One sentence naming every offending field and why, e.g.
 * `categoryId must be an integer; status must be one of available, pending, sold`.
 */
export function describeValidationErrors(errors: readonly ErrorObject[], httpPart: string): string {
  const subject = httpPart === 'body' ? 'request body' : httpPart;
  const unknown = httpPart === 'body' ? 'property' : 'parameter';
  // The first few unknown properties are named and the rest counted: 6,500 of them in a 64 KiB body
  // would otherwise make a 200 KB message.
  const unknownCount = errors.filter((error) => error.keyword === 'additionalProperties').length;
  let unknownSeen = 0;
  // A value that fits no branch of an anyOf with a message: that message alone, not one per branch.
  const explained = new Map<string, string>();
  for (const error of errors) {
    const message = (error.parentSchema as Record<string, unknown> | undefined)?.[ANY_OF_MESSAGE];
    if (error.keyword === 'anyOf' && typeof message === 'string') explained.set(error.instancePath, message);
  }
  const sentences = errors.flatMap((error) => {
    const message = explained.get(error.instancePath);
    if (message !== undefined) {
      return error.keyword === 'anyOf'
        ? `${error.instancePath.slice(1).replaceAll('/', '.')} ${message}`
        : [];
    }
    if (error.keyword === 'additionalProperties' && ++unknownSeen > UNKNOWN_NAMED) {
      return unknownSeen === UNKNOWN_NAMED + 1
        ? `and ${unknownCount - UNKNOWN_NAMED} more unknown ${unknown === 'property' ? 'properties' : 'parameters'}`
        : [];
    }
    const field = error.instancePath.slice(1).replaceAll('/', '.') || subject;
    switch (error.keyword) {
      case 'required':
        return `${error.params.missingProperty} is required`;
      case 'additionalProperties':
        return `${error.params.additionalProperty || '(empty name)'} is not a known ${unknown}`;
      case 'type':
        return `${field} must be ${/^[aeiou]/.test(error.params.type) ? 'an' : 'a'} ${error.params.type}`;
      case 'enum':
        return `${field} must be one of ${(error.params.allowedValues as unknown[]).join(', ')}`;
      case 'minLength':
        return `${field} must be at least ${error.params.limit} character${error.params.limit === 1 ? '' : 's'} long`;
      case 'maxLength':
        return `${field} must be at most ${error.params.limit} characters long`;
      case 'pattern':
        return `${field} ${(error.parentSchema as Record<string, string> | undefined)?.[PATTERN_MESSAGE] ?? error.message}`;
      default:
        return `${field} ${error.message}`;
    }
  });
  return [...new Set(sentences)].join('; ');
}
