// How file and secret options are resolved inside outbox.sink_files_directory (the rules of
// option_rules.hpp), and the small text helpers the option rules share. Internal to
// option_rules.cpp and option_files.cpp.
#pragma once

#include <string>
#include <string_view>

#include "sinks/common/option_rules.hpp"
#include "sinks/common/quoted.hpp"

namespace outbox::sinks {

namespace option_text {

inline constexpr const char* kInsideHint =
    "Give a path relative to outbox.sink_files_directory, or an absolute path inside it.";

// `sink "kafka": option "linger.ms"`
inline std::string about(std::string_view sink, std::string_view name) {
  return "sink " + quoted(sink) + ": option " + quoted(name);
}

// ` ("value")`, or nothing when the name looks sensitive. A path is shown whole
// (max_chars = kPathChars).
inline std::string shown(std::string_view name, std::string_view value,
                         std::size_t max_chars = 80) {
  if (looks_sensitive(name)) return "";
  return " (" + quoted(value, max_chars) + ")";
}

inline bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

inline bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace option_text

// Each resolves option `name`'s `value` for `sink` inside the files directory `directory`, or
// throws OptionError. The path of a kFile's regular file, not writable by every user:
std::string resolve_plain_file(std::string_view sink, std::string_view name,
                               const std::string& value, const std::string& directory);
// The path of a kPrivateFile's file, which gives other users no permission:
std::string resolve_private_file(std::string_view sink, std::string_view name,
                                 const std::string& value, const std::string& directory);
// The content of a kSecret's file (named by option <secret>_file), as private:
std::string read_secret(std::string_view sink, std::string_view name, const std::string& value,
                        const std::string& directory);

}  // namespace outbox::sinks
