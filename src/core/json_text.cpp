#include "core/json_text.hpp"

#include <array>
#include <cstring>

namespace outbox {
namespace {

// For each byte: 0 when it is written as it is, else the letter of its two-character escape,
// or 'u' for \u00xx.
constexpr std::array<char, 256> make_escapes() {
  std::array<char, 256> escapes{};
  for (int c = 0; c < 0x20; ++c) escapes[c] = 'u';
  escapes['\b'] = 'b';
  escapes['\f'] = 'f';
  escapes['\n'] = 'n';
  escapes['\r'] = 'r';
  escapes['\t'] = 't';
  escapes['"'] = '"';
  escapes['\\'] = '\\';
  return escapes;
}
constexpr std::array<char, 256> kEscapes = make_escapes();

}  // namespace

char* write_json_escaped(const char* s, std::size_t len, char* out) {
  std::size_t run = 0;  // start of the bytes not yet written
  for (std::size_t i = 0; i < len; ++i) {
    const char escape = kEscapes[static_cast<unsigned char>(s[i])];
    if (escape == 0) continue;
    std::memcpy(out, s + run, i - run);
    out += i - run;
    run = i + 1;
    *out++ = '\\';
    *out++ = escape;
    if (escape == 'u') {
      static constexpr char kHex[] = "0123456789abcdef";
      const unsigned char c = static_cast<unsigned char>(s[i]);
      *out++ = '0';
      *out++ = '0';
      *out++ = kHex[c >> 4];
      *out++ = kHex[c & 0xf];
    }
  }
  std::memcpy(out, s + run, len - run);
  out += len - run;
  return out;
}

}  // namespace outbox
