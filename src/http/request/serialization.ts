import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';

type SerializerFactory = ReturnType<typeof SerializerSelector>;

/** Keywords that document a schema and do not change what it serialises. */
const ANNOTATIONS = new Set(['description', 'examples', 'example', 'title', '$comment', 'deprecated']);
/** Keywords whose value maps names (of properties, of definitions) to schemas: the names are kept. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas']);

/** Keywords whose value is data, not a schema: kept whole. */
const VALUES = new Set(['enum', 'const', 'default']);

/** The schema without its annotations, as JSON: two schemas serialise alike when these are equal. */
export function serializationKey(schema: unknown): string {
  const strip = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(strip);
    if (node === null || typeof node !== 'object') return node;
    const kept: Record<string, unknown> = {};
    for (const [keyword, value] of Object.entries(node)) {
      if (ANNOTATIONS.has(keyword) || keyword.startsWith('x-')) continue;
      kept[keyword] = VALUES.has(keyword)
        ? value
        : SCHEMA_MAPS.has(keyword) && value !== null && typeof value === 'object'
          ? Object.fromEntries(Object.entries(value).map(([name, schema]) => [name, strip(schema)]))
          : strip(value);
    }
    return kept;
  };
  return JSON.stringify(strip(schema));
}

/**
 * Fastify's response serialiser (fast-json-stringify), built once per distinct schema instead of once
 * per route and status: every operation documents the same Error body for four to eight statuses,
 * differing only in examples and descriptions, and building each copy took most of the service's
 * start-up (about 170 ms of 300).
 */
export const buildSharedSerializers: SerializerFactory = (externalSchemas, options) => {
  const build = SerializerSelector()(externalSchemas, options);
  const built = new Map<string, ReturnType<typeof build>>();
  return (route) => {
    const key = serializationKey(route.schema);
    let serializer = built.get(key);
    if (!serializer) {
      serializer = build(route);
      built.set(key, serializer);
    }
    return serializer;
  };
};
