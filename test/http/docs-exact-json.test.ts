import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { EXACT_JSON_SCRIPT } from '../../src/http/documents/docs-exact-json.js';

/** The docs page's script, run as the page runs it, in a context of its own with a `window`. */
function pageScript(): { indentExactly: (text: string) => string } {
  const window: { PetstoreExactJson?: { indentExactly: (text: string) => string } } = {};
  runInNewContext(EXACT_JSON_SCRIPT, { window });
  assert.ok(window.PetstoreExactJson, 'the script defines its global');
  return window.PetstoreExactJson;
}

test('when any JSON is indented by the page script, then it reads as Swagger UI would show it', () => {
  const { indentExactly } = pageScript();
  fc.assert(
    fc.property(fc.jsonValue(), (value) => {
      const expected = JSON.stringify(value, null, 2);
      assert.equal(indentExactly(JSON.stringify(value)), expected);
      // White space the service might send changes nothing.
      assert.equal(indentExactly(JSON.stringify(value, null, '\t')), expected);
    }),
  );
});

test('when an integer is beyond 2^53, then the page script keeps every digit', () => {
  const { indentExactly } = pageScript();
  assert.equal(
    indentExactly(
      '[{"id":9223372036854775807,"categoryId":9007199254740993,"name":"a \\"quoted\\" [name], {x}"}]',
    ),
    [
      '[',
      '  {',
      '    "id": 9223372036854775807,',
      '    "categoryId": 9007199254740993,',
      '    "name": "a \\"quoted\\" [name], {x}"',
      '  }',
      ']',
    ].join('\n'),
  );
});
