// outbox._label(name, value): one label of outbox.metrics(), name="value", the value valid in
// the exposition (core/label_value.hpp) whatever the database's encoding. In a SQL_ASCII
// database the server converts nothing on the way out, so the value must be UTF-8 itself; in
// any other encoding, valid in that one (the client's conversion makes it UTF-8), so a name
// made from a SQL_ASCII database cannot make the conversion fail either.
#include <string>

#include "core/label_value.hpp"
#include "pg/boundary.hpp"

extern "C" {
#include "mb/pg_wchar.h"
}

OUTBOX_FUNCTION(outbox_label) {
  using namespace outbox;
  const int encoding = pg::guard([] { return GetDatabaseEncoding(); });
  CharLength char_length = utf8_char_length;
  if (encoding != PG_SQL_ASCII && encoding != PG_UTF8) {
    char_length = [encoding](const unsigned char* s, std::size_t len) -> std::size_t {
      const int n = pg_encoding_verifymbchar(encoding, reinterpret_cast<const char*>(s),
                                             static_cast<int>(len));
      return n > 0 ? static_cast<std::size_t>(n) : 0;
    };
  }
  std::string name;
  std::string value;
  pg::guard([&] {
    const text* n = PG_GETARG_TEXT_PP(0);
    const text* v = PG_GETARG_TEXT_PP(1);
    name.assign(VARDATA_ANY(n), VARSIZE_ANY_EXHDR(n));
    value.assign(VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));
  });
  const std::string label = name + "=\"" + label_value_escaped(value, char_length) + "\"";
  return pg::guard(
      [&] { return PointerGetDatum(cstring_to_text_with_len(label.data(), label.size())); });
}
