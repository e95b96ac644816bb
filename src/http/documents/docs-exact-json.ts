/**
 * A Swagger UI plugin, as the source of a script the docs page loads from the service (its content
 * security policy allows no inline script). Swagger UI shows a JSON response body as
 * JSON.stringify(JSON.parse(body)), which rounds every integer beyond 2^53 (9007199254740993 becomes
 * 9007199254740992): ids would be shown wrong. This plugin wraps the response body component and
 * indents the text the service sent instead, token by token, so every number keeps its digits; only
 * white space changes. Anything that is not valid JSON is left to Swagger UI.
 *
 * It is kept as text rather than a TypeScript function turned into a string: the transpilers in use
 * (tsx keeps function names with helper calls) would put references into its source that the page
 * does not have. test/http/docs-exact-json.test.ts runs it.
 */
export const EXACT_JSON_SCRIPT = String.raw`'use strict';
(function () {
  /** Indents JSON text without parsing its values: strings and numbers are copied as they are. */
  function indentExactly(text) {
    var out = '';
    var depth = 0;
    var i = 0;
    var newline = function (level) { return '\n' + '  '.repeat(level); };
    while (i < text.length) {
      var ch = text[i];
      if (ch === '"') {
        var end = i + 1;
        while (end < text.length && text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
        out += text.slice(i, end + 1);
        i = end + 1;
      } else if (ch === '{' || ch === '[') {
        var next = i + 1;
        while (/\s/.test(text[next] || '')) next++;
        if (text[next] === (ch === '{' ? '}' : ']')) {
          out += ch + text[next];
          i = next + 1;
        } else {
          depth++;
          out += ch + newline(depth);
          i++;
        }
      } else if (ch === '}' || ch === ']') {
        depth--;
        out += newline(depth) + ch;
        i++;
      } else if (ch === ',') {
        out += ',' + newline(depth);
        i++;
      } else if (ch === ':') {
        out += ': ';
        i++;
      } else if (/\s/.test(ch)) {
        i++;
      } else {
        out += ch;
        i++;
      }
    }
    return out;
  }

  function isJson(text) {
    try {
      JSON.parse(text);
      return true;
    } catch (error) {
      return false;
    }
  }

  function ExactJsonPlugin() {
    return {
      wrapComponents: {
        responseBody: function (Original, system) {
          return function ExactResponseBody(props) {
            var React = system.React;
            var content = props.content;
            if (!/json/i.test(props.contentType || '') || typeof content !== 'string' || !isJson(content)) {
              return React.createElement(Original, props);
            }
            var HighlightCode = system.getComponent('HighlightCode', true);
            return React.createElement(
              'div',
              null,
              React.createElement('h5', null, 'Response body'),
              React.createElement(
                HighlightCode,
                { language: 'json', downloadable: true, fileName: 'response.json', canCopy: true },
                indentExactly(content),
              ),
            );
          };
        },
      },
    };
  }

  window.PetstoreExactJson = { plugin: ExactJsonPlugin, indentExactly: indentExactly };
})();
`;
