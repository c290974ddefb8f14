#include "sinks/common/option_rules.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "sinks/common/option_files.hpp"

namespace outbox::sinks {

using namespace option_text;

namespace {

constexpr const char* kReferenceHint =
    "The options of each built-in sink, and why others are refused, are listed in "
    "docs/sink-options.md; a third-party sink documents its own.";

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool is_integer(std::string_view value) {
  if (!value.empty() && value[0] == '-') value.remove_prefix(1);
  if (value.empty() || value.size() > 18) return false;
  return std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
}

void check_value(std::string_view sink, const OptionSpec& spec, std::string_view value) {
  if (spec.kind == OptionKind::kInteger && !is_integer(value)) {
    throw OptionError(about(sink, spec.name) + " must be a whole number" + shown(spec.name, value),
                      {});
  }
  if (spec.kind == OptionKind::kBoolean && value != "true" && value != "false") {
    throw OptionError(about(sink, spec.name) + " must be true or false" + shown(spec.name, value),
                      {});
  }
}

[[noreturn]] void no_such_option(std::string_view sink, const OptionTable& table,
                                 std::string_view name) {
  std::string hint = kReferenceHint;
  if (ends_with(name, kSecretFileSuffix)) {
    const std::string_view base = name.substr(0, name.size() - kSecretFileSuffix.size());
    if (const OptionSpec* spec = table.find(base)) {
      hint = spec->kind == OptionKind::kFile || spec->kind == OptionKind::kPrivateFile
                 ? "Option " + quoted(base) + " names a file itself: give " + quoted(base) + "."
                 : "Option " + quoted(base) + " is not a secret: give its value as " +
                       quoted(base) + ".";
    }
  }
  throw OptionError("sink " + quoted(sink) + " has no option " + quoted(name), hint);
}

}  // namespace

const OptionSpec* OptionTable::find(std::string_view name) const {
  for (std::size_t i = 0; i < count; ++i) {
    if (name == specs[i].name) return &specs[i];
  }
  return nullptr;
}

bool looks_sensitive(std::string_view name) {
  const std::string n = lower(name);
  for (const char* word : {"password", "passwd", "secret", "key", "token", "credential", "jaas",
                           "pem", "sasl.username", "sasl.oauthbearer.config"}) {
    if (n.find(word) != std::string::npos) return true;
  }
  return false;
}

Options resolve_options(std::string_view sink, const OptionTable& table, const Options& given,
                        const std::string& files_directory) {
  Options out;
  out.reserve(given.size());
  for (const auto& [name, value] : given) {
    if (const OptionSpec* spec = table.find(name)) {
      switch (spec->kind) {
        case OptionKind::kSecret:
          // The value is not repeated: it may be the secret itself.
          throw OptionError(about(sink, name) + " is a secret and is never taken inline",
                            "Write it to a file inside outbox.sink_files_directory (mode 600 or "
                            "640, owned by the server's operating system user) and give that "
                            "file's name as " +
                                quoted(name + std::string(kSecretFileSuffix)) + ".");
        case OptionKind::kFile:
          out.emplace_back(name, resolve_plain_file(sink, name, value, files_directory));
          break;
        case OptionKind::kPrivateFile:
          out.emplace_back(name, resolve_private_file(sink, name, value, files_directory));
          break;
        default:
          check_value(sink, *spec, value);
          out.emplace_back(name, value);
      }
      continue;
    }
    if (ends_with(name, kSecretFileSuffix)) {
      const std::string base = name.substr(0, name.size() - kSecretFileSuffix.size());
      const OptionSpec* spec = table.find(base);
      if (spec != nullptr && spec->kind == OptionKind::kSecret) {
        out.emplace_back(base, read_secret(sink, name, value, files_directory));
        continue;
      }
    }
    no_such_option(sink, table, name);
  }
  return out;
}

void check_declared(std::string_view sink, const OptionTable& table, const Options& options) {
  for (const auto& [name, value] : options) {
    const OptionSpec* spec = table.find(name);
    if (spec == nullptr) no_such_option(sink, table, name);
    check_value(sink, *spec, value);
  }
}

std::vector<std::string> secret_values(const OptionTable& table, const Options& options) {
  std::vector<std::string> secrets;
  for (const auto& [name, value] : options) {
    const OptionSpec* spec = table.find(name);
    if (spec == nullptr || spec->kind != OptionKind::kSecret || value.empty()) continue;
    secrets.push_back(value);
    std::size_t at = 0;
    while (at < value.size()) {
      const std::size_t start = value.find_first_not_of(" \t\r\n", at);
      if (start == std::string::npos) break;
      std::size_t end = value.find_first_of(" \t\r\n", start);
      if (end == std::string::npos) end = value.size();
      if (end - start >= 8 && end - start < value.size()) {
        secrets.push_back(value.substr(start, end - start));
      }
      at = end;
    }
  }
  // Longest first: a word inside a longer secret must not cut that one's redaction short.
  std::sort(secrets.begin(), secrets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return secrets;
}

std::string redacted(std::string text, const std::vector<std::string>& secrets) {
  static constexpr std::string_view kRedacted = "[redacted]";
  for (const std::string& secret : secrets) {
    if (secret.empty()) continue;
    for (std::size_t at = text.find(secret); at != std::string::npos;
         at = text.find(secret, at + kRedacted.size())) {
      text.replace(at, secret.size(), kRedacted);
    }
  }
  return text;
}

}  // namespace outbox::sinks
