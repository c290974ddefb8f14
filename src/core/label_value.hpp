// A Prometheus label value as the text exposition format (0.0.4) wants it: valid UTF-8, with
// \ " and newline escaped. A database name or a sink name need not be valid UTF-8 (a
// SQL_ASCII database takes any bytes), and promtool and Prometheus refuse a label value that
// is not: such a byte is written as the four characters \xHH, so that names that differ
// stay different, which one replacement character for every bad byte would not keep.
// Plain C++, unit-tested without a server; src/pg/metrics_label.cpp calls it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace outbox {

// The length of the valid character that starts `s` (len > 0 bytes), or 0 when its first
// byte starts none.
using CharLength = std::function<std::size_t(const unsigned char* s, std::size_t len)>;

// Strict UTF-8, as PostgreSQL checks it: no overlong form, no surrogate, nothing above
// U+10FFFF.
std::size_t utf8_char_length(const unsigned char* s, std::size_t len);

// `value` escaped for the inside of a label's quotes: each byte that starts no valid
// character as \\xHH (lowercase hex; the value read back is \xHH), \ as \\, " as \", a
// newline as \n.
std::string label_value_escaped(std::string_view value, const CharLength& char_length);

}  // namespace outbox
