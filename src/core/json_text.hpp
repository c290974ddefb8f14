// The characters of JSON strings written byte for byte as PostgreSQL writes them in the text
// of a jsonb value (escape_json), so that what the relay sends is exactly payload::text.
// Plain C++, unit-tested without a server; src/pg/jsonb_text.hpp walks the jsonb.
#pragma once

#include <cstddef>

namespace outbox {

// The most that write_json_escaped() writes for len bytes: every byte as \u00xx.
constexpr std::size_t json_escaped_max_size(std::size_t len) { return 6 * len; }

// Writes s[0, len) escaped for a JSON string (without the quotes) at out, which has room for
// json_escaped_max_size(len) bytes, and returns the end of what it wrote. As PostgreSQL's
// escape_json: \" \\ \b \f \n \r \t, the other bytes below 0x20 as \u00xx (lowercase hex),
// every other byte (0x7f and UTF-8 sequences too) as it is. A caller may split a string
// anywhere: no escape spans two bytes of input.
char* write_json_escaped(const char* s, std::size_t len, char* out);

}  // namespace outbox
