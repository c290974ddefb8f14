#include "pg/jsonb_text.hpp"

#include <algorithm>

#include "core/json_text.hpp"

namespace outbox::pg {
namespace {

// Escaped in pieces, so that the worst case (6 bytes out for each byte in) of a long string
// never asks the buffer for more than this at once.
constexpr int kEscapeChunk = 8192;

void append_string(StringInfo buf, const char* s, int len) {
  appendStringInfoCharMacro(buf, '"');
  for (int done = 0; done < len;) {
    const int n = std::min(len - done, kEscapeChunk);
    enlargeStringInfo(buf, static_cast<int>(json_escaped_max_size(n)));
    char* end = write_json_escaped(s + done, n, buf->data + buf->len);
    buf->len = static_cast<int>(end - buf->data);
    done += n;
  }
  appendStringInfoCharMacro(buf, '"');
}

// A scalar as jsonb_put_escaped_value() writes it.
void append_scalar(StringInfo buf, const JsonbValue& v) {
  switch (v.type) {
    case jbvNull:
      appendBinaryStringInfo(buf, "null", 4);
      break;
    case jbvString:
      append_string(buf, v.val.string.val, v.val.string.len);
      break;
    case jbvNumeric: {
      char* digits =
          DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
      appendStringInfoString(buf, digits);
      pfree(digits);
      break;
    }
    case jbvBool:
      if (v.val.boolean) {
        appendBinaryStringInfo(buf, "true", 4);
      } else {
        appendBinaryStringInfo(buf, "false", 5);
      }
      break;
    default:
      elog(ERROR, "outbox: unexpected jsonb value type %d", static_cast<int>(v.type));
  }
}

}  // namespace

// The walk of JsonbToCStringWorker() without indentation: ", " between members and
// elements, ": " after a key, no brackets around a top-level scalar.
void append_jsonb_text(StringInfo buf, JsonbContainer* root) {
  JsonbIterator* it = JsonbIteratorInit(root);
  JsonbValue v;
  JsonbIteratorToken token;
  bool first = true;        // nothing written yet at this level: no ", " before the next item
  bool raw_scalar = false;  // the top level is a scalar, stored as a one-element array
  while ((token = JsonbIteratorNext(&it, &v, false)) != WJB_DONE) {
    switch (token) {
      case WJB_BEGIN_ARRAY:
        if (!first) appendBinaryStringInfo(buf, ", ", 2);
        if (v.val.array.rawScalar) {
          raw_scalar = true;
        } else {
          appendStringInfoCharMacro(buf, '[');
        }
        first = true;
        break;
      case WJB_BEGIN_OBJECT:
        if (!first) appendBinaryStringInfo(buf, ", ", 2);
        appendStringInfoCharMacro(buf, '{');
        first = true;
        break;
      case WJB_KEY:
        if (!first) appendBinaryStringInfo(buf, ", ", 2);
        append_string(buf, v.val.string.val, v.val.string.len);
        appendBinaryStringInfo(buf, ": ", 2);
        // A scalar value follows as WJB_VALUE; a container as its WJB_BEGIN_*, which must
        // not write a ", " of its own.
        first = true;
        break;
      case WJB_VALUE:
      case WJB_ELEM:
        if (!first && token == WJB_ELEM) appendBinaryStringInfo(buf, ", ", 2);
        append_scalar(buf, v);
        first = false;
        break;
      case WJB_END_ARRAY:
        if (!raw_scalar) appendStringInfoCharMacro(buf, ']');
        first = false;
        break;
      case WJB_END_OBJECT:
        appendStringInfoCharMacro(buf, '}');
        first = false;
        break;
      default:
        elog(ERROR, "outbox: unexpected jsonb token %d", static_cast<int>(token));
    }
  }
}

}  // namespace outbox::pg
