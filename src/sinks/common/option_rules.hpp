// The rules every sink option passes before a sink is created, from the sink's declaration
// (OutboxSinkCallbacks::options): no undeclared option; integers and booleans well-formed; files
// only inside outbox.sink_files_directory; secrets only from files there, never inline. Plain C++:
// src/pg/sink_loader.cpp applies resolve_options() for configure_sink and the relay, and each
// built-in sink applies check_declared() to what create() receives.
//
// No message here contains the value of a secret, nor the value of any option whose name
// looks sensitive (looks_sensitive()).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sinks/common/sink.hpp"

namespace outbox::sinks {

// A refused option: the message (without the caller's prefix) and a hint for the user.
class OptionError : public ConfigError {
 public:
  OptionError(const std::string& message, std::string hint)
      : ConfigError(message), hint_(std::move(hint)) {}
  const std::string& hint() const noexcept { return hint_; }

 private:
  std::string hint_;
};

// A sink's declared options.
struct OptionTable {
  const OptionSpec* specs = nullptr;
  std::size_t count = 0;
  // nullptr when `name` is not declared.
  const OptionSpec* find(std::string_view name) const;
};

// Largest secret file read (bytes).
inline constexpr std::size_t kMaxSecretBytes = 64 * 1024;
// The suffix of the option that names a kSecret option's file.
inline constexpr std::string_view kSecretFileSuffix = "_file";

// Whether an option's name suggests its value is confidential (password, secret, key, token,
// ...): no message or description shows such a value.
bool looks_sensitive(std::string_view name);

// The options as `sink` (its name, for messages) receives them: every name declared, kInteger
// and kBoolean values checked, kFile values replaced by the absolute real path of a regular file
// inside `files_directory`, and each "<name>_file" of a kSecret option replaced by <name> = the
// file's content. An empty `files_directory` refuses every kFile and kSecret option. Throws
// OptionError.
Options resolve_options(std::string_view sink, const OptionTable& table, const Options& given,
                        const std::string& files_directory);

// The values of the kSecret options among resolved `options`, for redacted(): each value, and
// each of its whitespace-separated words of 8 bytes or more (a file may hold several secrets,
// such as the signing keys of a rotation).
std::vector<std::string> secret_values(const OptionTable& table, const Options& options);

// `text` with every occurrence of every secret replaced by "[redacted]".
std::string redacted(std::string text, const std::vector<std::string>& secrets);

// For a sink's create(): every name declared, kInteger and kBoolean values well-formed. Kinds
// kFile and kSecret arrive resolved and are not checked again. Throws OptionError.
void check_declared(std::string_view sink, const OptionTable& table, const Options& options);

}  // namespace outbox::sinks
