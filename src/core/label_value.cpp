#include "core/label_value.hpp"

namespace outbox {

std::size_t utf8_char_length(const unsigned char* s, std::size_t len) {
  const unsigned char c = s[0];
  if (c < 0x80) return 1;
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (len < n || s[1] < lo || s[1] > hi) return 0;
  for (std::size_t i = 2; i < n; ++i) {
    if (s[i] < 0x80 || s[i] > 0xbf) return 0;
  }
  return n;
}

std::string label_value_escaped(std::string_view value, const CharLength& char_length) {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto* s = reinterpret_cast<const unsigned char*>(value.data());
  std::string out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size();) {
    const unsigned char c = s[i];
    std::size_t n = c == '\0' ? 0 : char_length(s + i, value.size() - i);
    if (n == 0) {
      out += "\\\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.append(value.data() + i, n);
    }
    i += n;
  }
  return out;
}

}  // namespace outbox
