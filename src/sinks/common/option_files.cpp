#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "sinks/common/option_files.hpp"

namespace outbox::sinks {

using namespace option_text;

namespace {

constexpr const char* kDirectoryHint =
    "A superuser sets outbox.sink_files_directory (in postgresql.conf, then a reload) to the "
    "directory that holds the sinks' certificates, keys and secret files.";

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

constexpr const char* kDirectoryModeHint =
    "Keep outbox.sink_files_directory and every directory inside it owned by the server's "
    "operating system user or root and writable only by that owner (chmod go-w): whoever can "
    "write in one of them chooses the files the sinks use.";

// Refuses a directory another user could change the files in: one writable by its group or
// by everyone, or owned by anyone but the server's operating system user or root. `subject`
// names it in the message.
void check_directory(const std::string& path, const std::string& subject) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    throw OptionError(subject + " cannot be examined: " + std::strerror(errno), {});
  }
  std::string problem;
  if ((st.st_mode & S_IWOTH) != 0) {
    problem = "is writable by every user of the machine";
  } else if ((st.st_mode & S_IWGRP) != 0) {
    problem = "is writable by its group";
  } else if (st.st_uid != geteuid() && st.st_uid != 0) {
    problem = "is owned by a user (uid " + std::to_string(st.st_uid) +
              ") other than the server's operating system user or root";
  }
  if (problem.empty()) return;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  throw OptionError(subject + " " + problem + " (mode " + mode + ")", kDirectoryModeHint);
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
    throw OptionError("outbox.sink_files_directory " + quoted(directory, kPathChars) +
                          " cannot be used: " + std::strerror(error),
                      kDirectoryHint);
  }
  if (!S_ISDIR(st.st_mode)) {
    throw OptionError(
        "outbox.sink_files_directory " + quoted(directory, kPathChars) + " is not a directory",
        kDirectoryHint);
  }
  check_directory(root, "outbox.sink_files_directory " + quoted(directory, kPathChars));
  return root;
}

// Checks every directory that the path `relative` below `root` passes through, symbolic links
// resolved, from the top down to the one holding `resolved` (the file): a directory that
// another user may change would let that user swap the file. A path that passes through a
// directory outside `root` (a link out and back in) is refused.
void check_directories(std::string_view sink, std::string_view name, const std::string& value,
                       const std::string& root, const std::string& relative,
                       const std::string& resolved) {
  std::vector<std::string> directories;  // below root, each after its ancestors
  const auto add = [&](const std::string& directory) {
    if (directory == root) return true;
    if (!starts_with(directory, root + "/")) return false;
    const std::size_t first = directories.size();
    for (std::string d = directory; d != root; d.resize(d.rfind('/'))) {
      if (std::find(directories.begin(), directories.end(), d) != directories.end()) break;
      directories.insert(directories.begin() + static_cast<std::ptrdiff_t>(first), d);
    }
    return true;
  };
  std::string prefix = root;
  for (std::size_t at = 0, slash; (slash = relative.find('/', at)) != std::string::npos;
       at = slash + 1) {
    prefix += "/" + relative.substr(at, slash - at);
    int error = 0;
    const std::string real = real_path(prefix, error);
    if (real.empty() || !add(real)) {
      throw OptionError(about(sink, name) +
                            " names a file through a directory outside "
                            "outbox.sink_files_directory (a symbolic link)" +
                            shown(name, value, kPathChars),
                        kInsideHint);
    }
  }
  add(resolved.substr(0, resolved.rfind('/')));
  for (const std::string& directory : directories) {
    check_directory(directory, about(sink, name) + ": the directory " +
                                   quoted(directory, kPathChars) +
                                   " inside outbox.sink_files_directory");
  }
}

// The absolute real path of the regular file that option `name`'s value names inside the
// directory.
std::string resolve_file(std::string_view sink, std::string_view name, const std::string& value,
                         const std::string& directory) {
  const std::string root = files_root(sink, name, directory);
  if (value.empty()) throw OptionError(about(sink, name) + " must name a file", kInsideHint);

  std::string lexical;
  std::string relative;  // the path below the directory
  bool inside = normalize(value, lexical);
  if (inside && value[0] == '/') {
    // Inside the directory as configured, or as resolved.
    std::string configured;
    if (normalize(directory, configured) && configured[0] == '/' &&
        starts_with(lexical, configured + "/")) {
      relative = lexical.substr(configured.size() + 1);
    } else if (starts_with(lexical, root + "/")) {
      relative = lexical.substr(root.size() + 1);
    } else {
      inside = false;
    }
  } else {
    relative = lexical;
  }
  const std::string candidate = root + "/" + relative;
  if (!inside || relative.empty()) {
    throw OptionError(about(sink, name) + " names a file outside outbox.sink_files_directory" +
                          shown(name, value, kPathChars),
                      kInsideHint);
  }

  int error = 0;
  const std::string resolved = real_path(candidate, error);
  if (resolved.empty()) {
    if (error == ENOENT || error == ENOTDIR) {
      throw OptionError(about(sink, name) + ": no such file in outbox.sink_files_directory" +
                            shown(name, value, kPathChars),
                        kInsideHint);
    }
    throw OptionError(about(sink, name) + ": the file cannot be resolved" +
                          shown(name, value, kPathChars) + ": " + std::strerror(error),
                      {});
  }
  if (!starts_with(resolved, root + "/")) {
    throw OptionError(about(sink, name) +
                          " names a file that resolves (through a symbolic link) to outside "
                          "outbox.sink_files_directory" +
                          shown(name, value, kPathChars),
                      kInsideHint);
  }
  check_directories(sink, name, value, root, relative, resolved);
  struct stat st {};
  if (stat(resolved.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw OptionError(
        about(sink, name) + " does not name a regular file" + shown(name, value, kPathChars),
        kInsideHint);
  }
  if (access(resolved.c_str(), R_OK) != 0) {
    throw OptionError(about(sink, name) + ": the server cannot read the file" +
                          shown(name, value, kPathChars) + ": " + std::strerror(errno),
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

}  // namespace

// The path of the file that option `name` names (kFile): one that not every user may change.
std::string resolve_plain_file(std::string_view sink, std::string_view name,
                               const std::string& value, const std::string& directory) {
  std::string path = resolve_file(sink, name, value, directory);
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    throw OptionError(about(sink, name) + ": the file cannot be read: " + std::strerror(errno), {});
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw OptionError(about(sink, name) + ": the file is writable by every user of the machine" +
                          " (mode " + mode + ")" + shown(name, value, kPathChars),
                      "chmod o-w the file: whoever can write it chooses what the sink reads.");
  }
  return path;
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

}  // namespace outbox::sinks
