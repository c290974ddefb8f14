// Text as an error message shows it. Plain C++, header-only: the option rules are compiled
// into outbox.so and into every sink library, the event templates into the sinks.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace outbox::sinks {

// Quoted, with non-printable and non-ASCII bytes, quotes and backslashes as \xNN (a value
// from a user or a broker cannot forge a line or a quote in a log), cut after max_chars
// characters.
inline std::string quoted(std::string_view text, std::size_t max_chars = 80) {
  std::string out = "\"";
  std::size_t shown = 0;
  for (char c : text) {
    if (shown++ == max_chars) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A file system path is shown whole.
inline constexpr std::size_t kPathChars = 4096;

}  // namespace outbox::sinks
