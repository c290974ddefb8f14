#include "sinks/option_rules.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace outbox::sinks {

namespace {

constexpr const char* kReferenceHint =
    "The options of each built-in sink, and why others are refused, are listed in "
    "docs/sink-options.md; a third-party sink documents its own.";
constexpr const char* kDirectoryHint =
    "A superuser sets outbox.sink_files_directory (in postgresql.conf, then a reload) to the "
    "directory that holds the sinks' certificates, keys and secret files.";
constexpr const char* kInsideHint =
    "Give a path relative to outbox.sink_files_directory, or an absolute path inside it.";

std::string quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

// `sink "kafka": option "linger.ms"`
std::string about(std::string_view sink, std::string_view name) {
  return "sink " + quoted(sink) + ": option " + quoted(name);
}

// ` ("value")`, or nothing when the name looks sensitive.
std::string shown(std::string_view name, std::string_view value) {
  if (looks_sensitive(name)) return "";
  return " (" + quoted(value) + ")";
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
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

// The path with "." and empty components dropped and ".." applied; false if ".." climbs above
// its start. Purely textual: nothing outside the directory is looked at before this holds.
bool normalize(std::string_view path, std::string& out) {
  std::vector<std::string_view> parts;
  std::size_t at = 0;
  while (at <= path.size()) {
    std::size_t end = path.find('/', at);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(at, end - at);
    if (part == "..") {
      if (parts.empty()) return false;
      parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    at = end + 1;
  }
  out = path.substr(0, 1) == "/" ? "/" : "";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += "/";
    out += parts[i];
  }
  return true;
}

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

// realpath(3) as a string; empty on failure, with the errno value in `error`.
std::string real_path(const std::string& path, int& error) {
  std::unique_ptr<char, FreeDeleter> resolved(realpath(path.c_str(), nullptr));
  error = resolved ? 0 : errno;
  return resolved ? std::string(resolved.get()) : std::string();
}

// The resolved directory of outbox.sink_files_directory, checked.
std::string files_root(std::string_view sink, std::string_view name, const std::string& directory) {
  if (directory.empty()) {
    throw OptionError(
        about(sink, name) + " names a file, but outbox.sink_files_directory is not set",
        kDirectoryHint);
  }
  int error = 0;
  const std::string root = real_path(directory, error);
  struct stat st {};
  if (!root.empty() && stat(root.c_str(), &st) != 0) error = errno;
  if (error != 0) {
    throw OptionError("outbox.sink_files_directory " + quoted(directory) +
                          " cannot be used: " + std::strerror(error),
                      kDirectoryHint);
  }
  if (!S_ISDIR(st.st_mode)) {
    throw OptionError("outbox.sink_files_directory " + quoted(directory) + " is not a directory",
                      kDirectoryHint);
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    throw OptionError("outbox.sink_files_directory " + quoted(directory) +
                          " is writable by every user of the machine",
                      "Make it writable only by the server's operating system user or root "
                      "(chmod o-w): anyone who can write there chooses the sinks' files.");
  }
  return root;
}

// The absolute real path of the regular file that option `name`'s value names inside the
// directory.
std::string resolve_file(std::string_view sink, std::string_view name, const std::string& value,
                         const std::string& directory) {
  const std::string root = files_root(sink, name, directory);
  if (value.empty()) throw OptionError(about(sink, name) + " must name a file", kInsideHint);

  std::string lexical;
  std::string candidate;
  bool inside = normalize(value, lexical);
  if (inside && value[0] == '/') {
    // Inside the directory as configured, or as resolved.
    std::string configured;
    inside = (normalize(directory, configured) && configured[0] == '/' &&
              starts_with(lexical, configured + "/")) ||
             starts_with(lexical, root + "/");
    candidate = lexical;
  } else {
    candidate = root + "/" + lexical;
  }
  if (!inside || lexical.empty()) {
    throw OptionError(about(sink, name) + " names a file outside outbox.sink_files_directory" +
                          shown(name, value),
                      kInsideHint);
  }

  int error = 0;
  const std::string resolved = real_path(candidate, error);
  if (resolved.empty()) {
    if (error == ENOENT || error == ENOTDIR) {
      throw OptionError(
          about(sink, name) + ": no such file in outbox.sink_files_directory" + shown(name, value),
          kInsideHint);
    }
    throw OptionError(about(sink, name) + ": the file cannot be resolved" + shown(name, value) +
                          ": " + std::strerror(error),
                      {});
  }
  if (!starts_with(resolved, root + "/")) {
    throw OptionError(about(sink, name) +
                          " names a file that resolves (through a symbolic link) to outside "
                          "outbox.sink_files_directory" +
                          shown(name, value),
                      kInsideHint);
  }
  struct stat st {};
  if (stat(resolved.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw OptionError(about(sink, name) + " does not name a regular file" + shown(name, value),
                      kInsideHint);
  }
  if (access(resolved.c_str(), R_OK) != 0) {
    throw OptionError(about(sink, name) + ": the server cannot read the file" + shown(name, value) +
                          ": " + std::strerror(errno),
                      "The file must be readable by the server's operating system user.");
  }
  return resolved;
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// Refuses a secret or private file that other users of the machine may read or write.
void check_private(std::string_view sink, std::string_view name, const struct stat& st,
                   const char* what) {
  if ((st.st_mode & 007) == 0) return;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  throw OptionError(about(sink, name) + ": the " + what + " is readable or writable by other " +
                        "users (mode " + mode + ")",
                    "chmod 600 (or 640) the file, owned by the server's operating system "
                    "user: a secret must not be readable by other users of the machine.");
}

// The path of the private file that option `name` names (kPrivateFile).
std::string resolve_private_file(std::string_view sink, std::string_view name,
                                 const std::string& value, const std::string& directory) {
  std::string path = resolve_file(sink, name, value, directory);
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    throw OptionError(about(sink, name) + ": the file cannot be read: " + std::strerror(errno), {});
  }
  check_private(sink, name, st, "private file");
  return path;
}

// The content of the secret file that option `name` (<secret>_file) names.
std::string read_secret(std::string_view sink, std::string_view name, const std::string& value,
                        const std::string& directory) {
  const std::string path = resolve_file(sink, name, value, directory);
  Fd file{open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)};
  struct stat st {};
  if (file.fd < 0 || fstat(file.fd, &st) != 0) {
    throw OptionError(about(sink, name) + ": the file cannot be read: " + std::strerror(errno), {});
  }
  if (!S_ISREG(st.st_mode)) {
    throw OptionError(about(sink, name) + " does not name a regular file", kInsideHint);
  }
  check_private(sink, name, st, "secret file");
  std::string content;
  char buf[8192];
  for (;;) {
    const ssize_t n = read(file.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw OptionError(about(sink, name) + ": the file cannot be read: " + std::strerror(errno),
                        {});
    }
    if (n == 0) break;
    content.append(buf, static_cast<std::size_t>(n));
    if (content.size() > kMaxSecretBytes) {
      throw OptionError(about(sink, name) + ": the secret file is larger than 64 KiB", {});
    }
  }
  if (ends_with(content, "\n")) {  // one trailing newline, as an editor or echo leaves it
    content.pop_back();
    if (ends_with(content, "\r")) content.pop_back();
  }
  if (content.empty()) throw OptionError(about(sink, name) + ": the secret file is empty", {});
  if (content.find('\0') != std::string::npos) {
    throw OptionError(about(sink, name) + ": the secret file contains a NUL byte", {});
  }
  return content;
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
          out.emplace_back(name, resolve_file(sink, name, value, files_directory));
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
