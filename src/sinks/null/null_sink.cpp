#include "sinks/null/null_sink.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "sinks/common/failed_keys.hpp"
#include "sinks/common/option_rules.hpp"

namespace outbox::sinks {

const OptionSpec kNullOptions[] = {
    {"fail_every", OptionKind::kInteger,
     "N >= 1: reject every Nth message (counted across batches), to exercise dead letters"},
    {"unavailable_every", OptionKind::kInteger,
     "N >= 1: every Nth message is unavailable (a transient failure), to exercise key holds"},
    {"throw_every", OptionKind::kInteger, "N >= 1: every Nth batch throws, as a buggy sink would"},
    {"delay_ms", OptionKind::kInteger,
     "0 to 1000: each batch takes this long, as a sink waiting for its broker would"},
    {"reject_aggregateid", OptionKind::kText,
     "reject the first event seen with this aggregateid, each time it is offered, reject_times "
     "times"},
    {"reject_times", OptionKind::kInteger,
     "1 to 1000 (default 1): how often reject_aggregateid's event is rejected before it is acked"},
    {"record_file", OptionKind::kFile,
     "existing file that gets a line per acked message (aggregatetype, aggregateid, id, type)"},
};
const std::size_t kNullOptionCount = std::size(kNullOptions);

namespace {

constexpr const char* kDeferredError = "not sent: an earlier event of its key failed";

struct NullSettings {
  std::uint64_t fail_every = 0;
  std::uint64_t unavailable_every = 0;
  std::uint64_t throw_every = 0;
  std::uint64_t delay_ms = 0;
  std::optional<std::string> reject_aggregateid;
  std::uint64_t reject_times = 1;
  std::optional<std::string> record_file;
};

class NullSink final : public Sink {
 public:
  explicit NullSink(NullSettings settings) : settings_(std::move(settings)) {
    if (settings_.record_file) record_fd_ = open_record_file(*settings_.record_file);
  }
  ~NullSink() override {
    if (record_fd_ >= 0) close(record_fd_);
  }
  NullSink(const NullSink&) = delete;
  NullSink& operator=(const NullSink&) = delete;

  // Synchronous, but the keys that failed hold back later batches' messages until this batch
  // is finished: the relay starts the next batch before it finishes this one.
  void start(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
             std::chrono::milliseconds /*timeout*/) override {
    begin_call();
    FailedKeys failed;
    decide(messages, outcomes, failed);
    started_.push_back(std::move(failed));
  }

  void finish() override {
    if (!started_.empty()) started_.pop_front();
  }

  std::string describe() const override {
    std::string out = "null";
    if (settings_.fail_every != 0) out += " fail_every=" + std::to_string(settings_.fail_every);
    if (settings_.unavailable_every != 0) {
      out += " unavailable_every=" + std::to_string(settings_.unavailable_every);
    }
    if (settings_.throw_every != 0) out += " throw_every=" + std::to_string(settings_.throw_every);
    if (settings_.delay_ms != 0) out += " delay_ms=" + std::to_string(settings_.delay_ms);
    if (settings_.reject_aggregateid) {
      out += " reject_aggregateid=" + *settings_.reject_aggregateid +
             " reject_times=" + std::to_string(settings_.reject_times);
    }
    if (settings_.record_file) out += " record_file=" + *settings_.record_file;
    return out;
  }

 private:
  static int open_record_file(const std::string& path) {
    // O_NONBLOCK: a FIFO without a reader fails here instead of blocking the relay.
    const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) {
      throw ConfigError("null sink: record_file \"" + path +
                        "\" cannot be opened: " + std::strerror(errno));
    }
    // The file opened, not its name: what is written to is what was checked.
    struct stat st {};
    if (fstat(fd, &st) != 0) {
      const int error = errno;
      close(fd);
      throw ConfigError("null sink: record_file \"" + path +
                        "\" cannot be examined: " + std::strerror(error));
    }
    if (S_ISREG(st.st_mode) && (st.st_mode & 007) == 0) {
      close(fd);
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      throw ConfigError("null sink: record_file \"" + path +
                        "\" gives other users no permission (mode " + mode +
                        "), as a secret file or a private key must: the null sink appends only "
                        "to a file that other users may read (chmod o+r, e.g. 644), so that "
                        "configure_sink cannot make it write into a secret or a key");
    }
    return fd;
  }

  // What every send() and start() does first: the delay, then maybe the exception.
  void begin_call() {
    ++calls_;
    // A slow sink, for benchmarks where the sink is the bottleneck (capped at 1 s, so that a
    // shutdown waits at most that long).
    if (settings_.delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(settings_.delay_ms));
    }
    if (settings_.throw_every != 0 && calls_ % settings_.throw_every == 0) {
      throw std::runtime_error(
          "the null sink threw (throw_every=" + std::to_string(settings_.throw_every) + ")");
    }
  }

  // Sets every outcome of the batch; `failed` gets the keys of the messages not acked
  // (deferred ones too: a later batch must not overtake them either).
  void decide(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
              FailedKeys& failed) {
    outcomes.resize(messages.size());
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const Message& m = messages[i];
      if (failed.find(m) != nullptr || failed_in_started(m)) {
        outcomes[i] = Outcome{Delivery::kDeferred, kDeferredError};
        failed.add(m, kDeferredError);
        continue;
      }
      outcomes[i] = offer(m);
      if (outcomes[i].delivery != Delivery::kAcked) failed.add(m, outcomes[i].error);
    }
    if (record_fd_ >= 0) record(messages, outcomes, failed);
  }

  bool failed_in_started(const Message& m) const {
    for (const FailedKeys& keys : started_) {
      if (keys.find(m) != nullptr) return true;
    }
    return false;
  }

  // The outcome of a message that nothing holds back.
  Outcome offer(const Message& m) {
    ++offered_;
    if (settings_.reject_aggregateid && !reject_id_ &&
        m.aggregateid == *settings_.reject_aggregateid) {
      reject_id_ = std::string(m.id);
    }
    if (reject_id_ && m.id == *reject_id_ && rejections_ < settings_.reject_times) {
      ++rejections_;
      return Outcome{
          Delivery::kRejected,
          "rejected by the null sink (reject_aggregateid=" + *settings_.reject_aggregateid + ", " +
              std::to_string(rejections_) + " of " + std::to_string(settings_.reject_times) + ")"};
    }
    if (settings_.fail_every != 0 && offered_ % settings_.fail_every == 0) {
      return Outcome{Delivery::kRejected, "rejected by the null sink (fail_every=" +
                                              std::to_string(settings_.fail_every) + ")"};
    }
    // A transient failure: the relay holds the key back and sends it again, no attempt counted.
    if (settings_.unavailable_every != 0 && offered_ % settings_.unavailable_every == 0) {
      return Outcome{Delivery::kUnavailable, "unavailable: the null sink's unavailable_every=" +
                                                 std::to_string(settings_.unavailable_every)};
    }
    return Outcome{Delivery::kAcked, {}};
  }

  // Appends the acked messages' lines with one write(2), so that concurrent writers'
  // batches never interleave; if it fails, none of them counts as delivered.
  void record(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
              FailedKeys& failed) {
    std::string lines;
    for (std::size_t i = 0; i < messages.size(); ++i) {
      if (outcomes[i].delivery != Delivery::kAcked) continue;
      const Message& m = messages[i];
      lines.append(m.aggregatetype).append("\t").append(m.aggregateid).append("\t");
      lines.append(m.id).append("\t").append(m.type).append("\n");
    }
    if (lines.empty()) return;
    ssize_t written;
    do {
      written = write(record_fd_, lines.data(), lines.size());
    } while (written < 0 && errno == EINTR);
    if (written == static_cast<ssize_t>(lines.size())) return;

    const std::string error =
        written < 0
            ? "the null sink cannot write its record_file: " + std::string(std::strerror(errno))
            : "the null sink wrote only " + std::to_string(written) + " of " +
                  std::to_string(lines.size()) + " bytes to its record_file";
    for (std::size_t i = 0; i < messages.size(); ++i) {
      if (outcomes[i].delivery != Delivery::kAcked) continue;
      outcomes[i] = Outcome{Delivery::kUnavailable, error};
      failed.add(messages[i], error);
    }
  }

  const NullSettings settings_;
  int record_fd_ = -1;
  std::uint64_t offered_ = 0;             // messages offered, deferred ones not counted (*_every)
  std::uint64_t calls_ = 0;               // send() and start() calls (throw_every)
  std::optional<std::string> reject_id_;  // the id of reject_aggregateid's first message
  std::uint64_t rejections_ = 0;
  // The failed keys of each started, unfinished batch, oldest first.
  std::deque<FailedKeys> started_;
};

// A whole number in [min, max].
std::uint64_t parse_whole(const std::string& name, const std::string& value, std::uint64_t min,
                          std::uint64_t max, const std::string& range) {
  const std::string error =
      "null sink: " + name + " must be a whole number " + range + ", not \"" + value + "\"";
  if (value.empty() || value.size() > 18) throw ConfigError(error);
  std::uint64_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') throw ConfigError(error);
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (n < min || n > max) throw ConfigError(error);
  return n;
}

std::uint64_t parse_every(const std::string& name, const std::string& value) {
  return parse_whole(name, value, 1, UINT64_MAX, ">= 1");
}

}  // namespace

std::unique_ptr<Sink> create_null_sink(const Options& options) {
  check_declared("null", OptionTable{kNullOptions, kNullOptionCount}, options);
  NullSettings settings;
  bool reject_times_given = false;
  for (const auto& [name, value] : options) {
    if (name == "fail_every") {
      settings.fail_every = parse_every(name, value);
    } else if (name == "unavailable_every") {
      settings.unavailable_every = parse_every(name, value);
    } else if (name == "throw_every") {
      settings.throw_every = parse_every(name, value);
    } else if (name == "delay_ms") {
      settings.delay_ms = parse_whole(name, value, 0, 1000, "from 0 to 1000");
    } else if (name == "reject_aggregateid") {
      // outbox.enqueue refuses an empty aggregateid: it would never match.
      if (value.empty()) throw ConfigError("null sink: reject_aggregateid must not be empty");
      settings.reject_aggregateid = value;
    } else if (name == "reject_times") {
      settings.reject_times = parse_whole(name, value, 1, 1000, "from 1 to 1000");
      reject_times_given = true;
    } else {  // declared: record_file
      settings.record_file = value;
    }
  }
  if (reject_times_given && !settings.reject_aggregateid) {
    throw ConfigError("null sink: reject_times needs reject_aggregateid");
  }
  return std::make_unique<NullSink>(std::move(settings));
}

}  // namespace outbox::sinks
