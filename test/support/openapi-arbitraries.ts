import fc from 'fast-check';

/**
 * fast-check arbitraries derived from the served OpenAPI document: request bodies, query and path
 * values generated from a schema, valid or not, each knowing whether the document says it is valid.
 * The property tests of pets (test/http/properties.test.ts) and of orders
 * (test/http/order-properties.test.ts) build their requests from these.
 */

export type Json = Record<string, unknown>;

/** A generated piece of a request, and whether the document says it is valid. */
export interface Part {
  /** JSON text (bodies) or raw text (query and path values). */
  text: string;
  valid: boolean;
  /** For a valid body value, what the service must store. */
  value?: string;
}

/** Resolves a local `$ref` in the document. */
export function resolve(doc: Json, schema: Json): Json {
  const ref = schema.$ref;
  if (typeof ref !== 'string') return schema;
  let node: unknown = doc;
  for (const segment of ref.replace(/^#\//, '').split('/')) node = (node as Json)[segment];
  return resolve(doc, node as Json);
}

const codePoints = (text: string) => [...text].length;

/** Characters that test the name rules: controls, lone surrogates, white space, astral, SQL. */
const trickyChar = fc.constantFrom(
  '\u0000',
  '\u001f',
  '\u007f',
  '\t',
  '\n',
  ' ',
  '\u00a0',
  '\u3000',
  '\ud800',
  '\udc00',
  '🐶',
  'é',
  'e\u0301',
  "'",
  '"',
  '\\',
  '%',
  '_',
  ';',
  '-',
  'a',
);

/** An arbitrary string value for a string schema: valid or not according to that schema alone. */
export function stringPart(schema: Json): fc.Arbitrary<Part> {
  const min = (schema.minLength as number | undefined) ?? 0;
  const max = (schema.maxLength as number | undefined) ?? 1000;
  // Ajv's patterns are Unicode regular expressions, and its lengths count code points.
  const pattern = typeof schema.pattern === 'string' ? new RegExp(schema.pattern, 'u') : undefined;
  const enumValues = schema.enum as string[] | undefined;
  const isValid = (s: string) =>
    enumValues
      ? enumValues.includes(s)
      : codePoints(s) >= min && codePoints(s) <= max && (!pattern || pattern.test(s));
  const candidates = fc.oneof(
    ...(enumValues
      ? [fc.constantFrom(...enumValues), fc.constantFrom(...enumValues.map((v) => v.toUpperCase()))]
      : []),
    fc.string({ unit: 'grapheme', minLength: 0, maxLength: 40 }),
    fc.string({ unit: trickyChar, minLength: 0, maxLength: 12 }),
    fc.string({ unit: 'binary', minLength: 0, maxLength: 20 }),
    fc.integer({ min: Math.max(0, max - 2), max: max + 2 }).map((n) => 'x'.repeat(n)),
    fc.integer({ min: Math.max(0, max - 2), max: max + 2 }).map((n) => '🐶'.repeat(n)),
  );
  return candidates.map((s) => ({ text: JSON.stringify(s), valid: isValid(s), value: s }));
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** An integer schema's bounds (int64 when its format says so). */
function integerBounds(schema: Json): [bigint, bigint] {
  const int64 = schema.format === 'int64';
  const min = typeof schema.minimum === 'number' ? BigInt(schema.minimum) : int64 ? INT64_MIN : -(2n ** 53n);
  const max = typeof schema.maximum === 'number' ? BigInt(schema.maximum) : int64 ? INT64_MAX : 2n ** 53n;
  return [min, max];
}

/** Integer values as JSON literals (bodies) or decimal text (parameters), valid or not. */
export function integerPart(schema: Json, inJson: boolean): fc.Arbitrary<Part> {
  const [min, max] = integerBounds(schema);
  const valid = fc
    .oneof(fc.bigInt({ min, max }), fc.constantFrom(min, max, min + 1n > max ? min : min + 1n))
    .map((n): Part => ({ text: String(n), valid: true, value: String(n) }));
  const outOfRange = fc
    .oneof(
      fc.bigInt({ min: max + 1n, max: max + 2n ** 70n }),
      fc.bigInt({ min: min - 2n ** 70n, max: min - 1n }),
    )
    .map((n): Part => ({ text: String(n), valid: false }));
  const notIntegers = fc
    .oneof(
      fc
        .double({ noNaN: true, noDefaultInfinity: true })
        .filter((d) => !Number.isInteger(d))
        .map(String),
      fc.constantFrom('1.0', '1e2', '1e400', '-1e400', '1e-400', '0x10', '1.5', '+1', '01', ''),
      ...(inJson
        ? [fc.constantFrom('"1"', 'true', 'false', 'null', '[]', '{}', '[1]')]
        : [fc.string({ unit: trickyChar, maxLength: 6 }).filter((s) => !/^-?(0|[1-9][0-9]*)$/.test(s))]),
    )
    .map((text): Part => ({ text, valid: false }));
  return fc.oneof(
    { weight: 3, arbitrary: valid },
    { weight: 1, arbitrary: outOfRange },
    { weight: 1, arbitrary: notIntegers },
  );
}

/** A value for a schema inside a JSON body: of its type (valid or not) or of a wrong JSON type. */
export function bodyValuePart(doc: Json, raw: Json): fc.Arbitrary<Part> {
  const schema = resolve(doc, raw);
  const ofType = schema.type === 'integer' ? integerPart(schema, true) : stringPart(schema);
  const wrongType = fc
    .constantFrom(
      'null',
      'true',
      '[]',
      '{}',
      '{"__proto__":{"polluted":1}}',
      schema.type === 'integer' ? '"7"' : '7',
    )
    .map((text): Part => ({ text, valid: false }));
  return fc.oneof({ weight: 4, arbitrary: ofType }, { weight: 1, arbitrary: wrongType });
}

/** A generated JSON body, whether the document says it is valid, and why not. */
export interface GeneratedBody {
  text: string;
  valid: boolean;
  /** For a valid body, the values the service must store. */
  values: Record<string, string>;
  /** Every property that makes it invalid (missing, of a wrong value, or unknown): a 400 names each. */
  offending: string[];
}

/**
 * What a refusal of `body` must say: the name of each offending property, once the body parses as
 * JSON (a body that does not, say an integer written `01`, is refused as not JSON, naming no field).
 */
export function refusalMessage(body: GeneratedBody): { names: string[] } | RegExp {
  try {
    JSON.parse(body.text);
  } catch {
    return /^request body is not valid JSON/;
  }
  return { names: body.offending };
}

/** A body for an object schema: each property present or missing, plus perhaps properties it does not define. */
export function objectBody(doc: Json, raw: Json): fc.Arbitrary<GeneratedBody> {
  const schema = resolve(doc, raw);
  const properties = schema.properties as Record<string, Json>;
  const required = new Set(schema.required as string[]);
  const names = Object.keys(properties);
  const fields = fc.record(
    Object.fromEntries(
      names.map((name) => [
        name,
        fc.option(bodyValuePart(doc, properties[name] as Json), {
          freq: required.has(name) ? 8 : 2,
          nil: undefined,
        }),
      ]),
    ) as Record<string, fc.Arbitrary<Part | undefined>>,
  );
  const extraName = fc
    .oneof(fc.constantFrom('id', '__proto__', 'constructor', 'Name', 'colour'), fc.string({ maxLength: 8 }))
    .filter((name) => !names.includes(name));
  const extras =
    schema.additionalProperties === false
      ? fc.option(fc.uniqueArray(extraName, { minLength: 1, maxLength: 2 }), { freq: 4, nil: undefined })
      : fc.constant(undefined);
  return fc.tuple(fields, extras).map(([parts, extra]) => {
    const entries: string[] = [];
    const offending: string[] = [];
    const values: Record<string, string> = {};
    for (const name of names) {
      const part = parts[name];
      if (part === undefined) {
        if (required.has(name)) offending.push(name);
        continue;
      }
      entries.push(`${JSON.stringify(name)}:${part.text}`);
      if (!part.valid) offending.push(name);
      if (part.value !== undefined) values[name] = part.value;
    }
    for (const name of extra ?? []) entries.push(`${JSON.stringify(name)}:1`);
    offending.push(...(extra ?? []));
    return { text: `{${entries.join(',')}}`, valid: offending.length === 0, values, offending };
  });
}

/** A query or path parameter value, valid or not according to its schema. */
export function parameterPart(doc: Json, raw: Json): fc.Arbitrary<Part> {
  const schema = resolve(doc, raw);
  if (schema.type === 'integer') return integerPart(schema, false);
  return stringPart(schema).map((part) => ({ ...part, text: part.value as string }));
}

/**
 * The parameters of a query a 400 must name: every one the document's schema refuses. A cursor is
 * only checked once the rest is valid (it is opaque to the schema), so it is named when it alone is.
 */
export function invalidParameters(query: Record<string, Part | undefined>): string[] {
  const invalid = Object.entries(query)
    .filter(([, part]) => part !== undefined && !part.valid)
    .map(([name]) => name);
  const bySchema = invalid.filter((name) => name !== 'cursor');
  return bySchema.length > 0 ? bySchema : invalid;
}
