import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nextHref, parseLinkHeader } from './paging.js';

const withLink = (value: string) => ({ headers: new Headers({ link: value }) });

test('when a Link header has several link-values and parameters, then each is read as RFC 8288 writes it', () => {
  assert.deepEqual(
    parseLinkHeader('<https://a.example/x?a=1&b=2>; rel="prev next"; title="a \\"b\\"", </c>;rel=last'),
    [
      { target: 'https://a.example/x?a=1&b=2', params: { rel: 'prev next', title: 'a "b"' } },
      { target: '/c', params: { rel: 'last' } },
    ],
  );
});

test('when the next link is looked for, then only a rel of next counts, among other relation types too', () => {
  assert.equal(nextHref(withLink('</v1/pets?cursor=a>; rel="next"')), '/v1/pets?cursor=a');
  assert.equal(nextHref(withLink('</a>; rel="prev NEXT"')), '/a');
  assert.equal(nextHref(withLink('</docs>; rel="deprecation"; type="text/html"')), undefined);
  assert.equal(nextHref({ headers: new Headers() }), undefined);
});

test('when a Link header is not RFC 8288, or names two next links, then it fails the test', () => {
  for (const bad of ['/v1/pets; rel=next', '<a>; rel="next" junk', '<a>; rel="next', '<a> rel=next'])
    assert.throws(() => nextHref(withLink(bad)), /not an RFC 8288 Link header/, bad);
  assert.throws(() => nextHref(withLink('<a>; rel="next", <b>; rel=next')), /more than one next link/);
});
