#include "sinks/host/plugin_host.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "sinks/host/strided_array.hpp"

namespace outbox::sinks {
namespace {

// The size of version 2's table, up to and including the last required callback, and of its
// message and outcome: a plugin must cover at least those.
constexpr std::size_t kMinimumTableSize =
    offsetof(OutboxSinkCallbacks, describe) + sizeof(OutboxSinkCallbacks::describe);
constexpr std::size_t kMinimumMessageSize =
    offsetof(OutboxSinkMessage, created_at_unix_us) + sizeof(OutboxSinkMessage::created_at_unix_us);
constexpr std::size_t kMinimumOutcomeSize =
    offsetof(OutboxSinkOutcome, error_len) + sizeof(OutboxSinkOutcome::error_len);
constexpr std::size_t kMaxStride = 4096;
// An outcome's error text is cut there.
constexpr std::size_t kMaxErrorBytes = 4096;
constexpr std::size_t kMaxOptions = 1000;

bool valid_option_name(const char* name) {
  if (name == nullptr) return false;
  const std::size_t length = std::strlen(name);
  if (length == 0 || length > 63) return false;
  for (std::size_t i = 0; i < length; ++i) {
    const char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

// A sink's text (an error, its description) as the relay shows it: up to the first NUL within
// `size` bytes, control characters replaced, so a missing terminator or stray bytes cannot
// run past the buffer or into the log's lines.
std::string sink_text(const char* text, std::size_t size) {
  if (text == nullptr) return {};
  const void* end = std::memchr(text, '\0', size);
  std::string out(text, end != nullptr ? static_cast<const char*>(end) - text : size);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

OutboxSinkString c_string(std::string_view s) { return {s.data(), s.size()}; }

// One started batch, as the plugin sees it, with the plugin's strides: stays in place until
// its finish() returns. Its vectors are kept for the next batch.
struct Batch {
  StridedArray messages;
  std::vector<OutboxSinkHeader> headers;
  StridedArray outcomes;  // zeroed: OUTBOX_DELIVERY_PENDING, no error
  std::size_t count = 0;
  std::vector<Outcome>* target = nullptr;
};

class HostedSink final : public Sink {
 public:
  HostedSink(const OutboxSinkCallbacks& callbacks, std::string name,
             std::vector<std::string> secrets)
      : callbacks_(callbacks), name_(std::move(name)), secrets_(std::move(secrets)) {
    host_.size = sizeof(host_);
    host_.context = this;
    host_.keep_waiting = &HostedSink::keep_waiting_thunk;
  }
  ~HostedSink() override {
    if (state_ != nullptr) callbacks_.destroy(state_);
  }
  HostedSink(const HostedSink&) = delete;
  HostedSink& operator=(const HostedSink&) = delete;

  void create(const Options& resolved) {
    std::vector<OutboxSinkOption> options;
    options.reserve(resolved.size());
    for (const auto& [key, value] : resolved) options.push_back({key.c_str(), value.c_str()});
    char error[OUTBOX_SINK_ERROR_SIZE] = "";
    void* state = nullptr;
    const int status =
        callbacks_.create(options.data(), options.size(), &host_, &state, error, sizeof(error));
    if (status == OUTBOX_SINK_OK) {
      state_ = state;
      return;
    }
    std::string message = shown(error, sizeof(error));
    if (message.empty()) message = "sink " + name_ + " could not be created";
    if (status == OUTBOX_SINK_CONFIG_ERROR) throw ConfigError(message);
    throw std::runtime_error(message);
  }

  void start(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
             std::chrono::milliseconds timeout) override {
    if (spare_.empty()) {
      started_.emplace_back();
    } else {
      started_.push_back(std::move(spare_.back()));
      spare_.pop_back();
    }
    Batch& batch = started_.back();
    fill(batch, messages, outcomes);
    char error[OUTBOX_SINK_ERROR_SIZE] = "";
    const int status = call([&] {
      return callbacks_.start(state_, static_cast<const OutboxSinkMessage*>(batch.messages.data()),
                              static_cast<OutboxSinkOutcome*>(batch.outcomes.data()), batch.count,
                              timeout.count(), error, sizeof(error));
    });
    if (status != OUTBOX_SINK_OK) {
      retire_newest();
      fail(status, error, sizeof(error));
    }
    // Without finish(), start() is synchronous: the outcomes are final now.
    if (callbacks_.finish == nullptr) take_oldest();
  }

  void finish() override {
    if (started_.empty()) return;
    char error[OUTBOX_SINK_ERROR_SIZE] = "";
    const int status = call([&] { return callbacks_.finish(state_, error, sizeof(error)); });
    if (status != OUTBOX_SINK_OK) {
      retire_oldest();
      fail(status, error, sizeof(error));
    }
    take_oldest();
  }

  bool usable() const override {
    return usable_ && (callbacks_.usable == nullptr || callbacks_.usable(state_) != 0);
  }

  std::string describe() const override {
    char buffer[256] = "";
    callbacks_.describe(state_, buffer, sizeof(buffer));
    return shown(buffer, sizeof(buffer));
  }

  std::size_t max_message_bytes() const override {
    return callbacks_.max_message_bytes != nullptr
               ? static_cast<std::size_t>(callbacks_.max_message_bytes(state_))
               : 0;
  }

  std::vector<LogLine> take_log() override {
    std::vector<LogLine> lines;
    {
      std::lock_guard<std::mutex> lock(breaches_mu_);
      for (const std::string& breach : new_breaches_) {
        lines.push_back({4, "sink " + name_ + " broke the sink interface: " + breach});
      }
      new_breaches_.clear();
    }
    if (callbacks_.take_log != nullptr) {
      struct Collector {
        std::vector<LogLine>* lines;
        const HostedSink* self;
      } collector{&lines, this};
      callbacks_.take_log(
          state_,
          // Called from the plugin's C code: out of memory drops the line, no exception.
          [](void* context, int level, const char* text) noexcept {
            auto* c = static_cast<Collector*>(context);
            try {
              c->lines->push_back({level < 0   ? 0
                                   : level > 7 ? 7
                                               : level,
                                   c->self->shown(text, OUTBOX_SINK_ERROR_SIZE * 8)});
            } catch (...) {
            }
          },
          &collector);
    }
    return lines;
  }

 private:
  // Runs start() or finish() with the calling thread known: keep_waiting() answers only there.
  template <typename F>
  int call(F&& f) {
    caller_.store(std::this_thread::get_id());
    const int status = f();
    caller_.store(std::thread::id());
    return status;
  }

  // Called from the plugin's C code: no exception may leave it (out of memory: stop waiting).
  static int keep_waiting_thunk(void* context, const char* client_error) noexcept {
    auto* self = static_cast<HostedSink*>(context);
    try {
      if (self->caller_.load() != std::this_thread::get_id()) {
        self->breach(
            "keep_waiting() was called outside start() or finish(), or from another "
            "thread; it returned 0");
        return 0;
      }
      return self->keep_waiting(client_error != nullptr ? client_error : "") ? 1 : 0;
    } catch (...) {
      return 0;
    }
  }

  void breach(const std::string& what) {
    std::lock_guard<std::mutex> lock(breaches_mu_);
    if (breaches_.insert(what).second) new_breaches_.push_back(what);
  }

  void fill(Batch& batch, const std::vector<Message>& messages, std::vector<Outcome>& outcomes) {
    std::size_t header_count = 0;
    for (const Message& m : messages) header_count += m.headers.size();
    batch.count = messages.size();
    batch.messages.reset(batch.count, callbacks_.message_size);
    batch.outcomes.reset(batch.count, callbacks_.outcome_size);
    batch.headers.clear();
    // Reserved before the first push_back: the messages point into `headers`.
    batch.headers.reserve(header_count);
    for (std::size_t i = 0; i < batch.count; ++i) {
      const Message& m = messages[i];
      OutboxSinkMessage c{};
      c.id = c_string(m.id);
      c.aggregatetype = c_string(m.aggregatetype);
      c.aggregateid = c_string(m.aggregateid);
      c.type = c_string(m.type);
      c.payload = c_string(m.payload);
      c.headers = batch.headers.data() + batch.headers.size();
      c.header_count = m.headers.size();
      for (const auto& [name, value] : m.headers) {
        batch.headers.push_back({c_string(name), c_string(value)});
      }
      c.created_at_unix_us = m.created_at_unix_us;
      batch.messages.put(i, c);
    }
    batch.target = &outcomes;
  }

  // A sink's text as the relay shows it: cut, cleaned, and with the values of the options it
  // declared secret redacted, whatever the sink wrote.
  std::string shown(const char* text, std::size_t size) const {
    return redacted(sink_text(text, size), secrets_);
  }
  std::string shown(const OutboxSinkOutcome& c) const {
    return shown(c.error, std::min(c.error_len, kMaxErrorBytes));
  }

  [[noreturn]] void fail(int status, const char* error, std::size_t size) {
    std::string message = shown(error, size);
    if (status == OUTBOX_SINK_FATAL) usable_ = false;
    if (status == OUTBOX_SINK_CONFIG_ERROR) {
      throw ConfigError(message.empty() ? "sink " + name_ + ": configuration error" : message);
    }
    if (status != OUTBOX_SINK_UNAVAILABLE && status != OUTBOX_SINK_FATAL) {
      breach("a callback returned the unknown status " + std::to_string(status));
    }
    throw std::runtime_error(message.empty() ? "sink " + name_ + ": batch failed" : message);
  }

  // The oldest batch's outcomes, into the relay's vector; unset or unknown codes count as
  // kUnavailable.
  void take_oldest() {
    Batch& batch = started_.front();
    std::vector<Outcome>& target = *batch.target;
    for (std::size_t i = 0; i < batch.count && i < target.size(); ++i) {
      const auto c = batch.outcomes.get<OutboxSinkOutcome>(i);
      Outcome& o = target[i];
      switch (c.delivery) {
        case OUTBOX_DELIVERY_ACKED:
          o = {Delivery::kAcked, {}};
          break;
        case OUTBOX_DELIVERY_UNAVAILABLE:
          o = {Delivery::kUnavailable, shown(c)};
          break;
        case OUTBOX_DELIVERY_REJECTED:
          o = {Delivery::kRejected, shown(c)};
          break;
        case OUTBOX_DELIVERY_DEFERRED:
          o = {Delivery::kDeferred, shown(c)};
          break;
        default:
          o = {Delivery::kUnavailable, "sink " + name_ +
                                           " set no outcome for this message (delivery code " +
                                           std::to_string(c.delivery) + ")"};
          breach("a batch ended with a message whose outcome was not set");
      }
    }
    retire_oldest();
  }

  void retire_oldest() {
    spare_.push_back(std::move(started_.front()));
    started_.pop_front();
  }
  void retire_newest() {
    spare_.push_back(std::move(started_.back()));
    started_.pop_back();
  }

  const OutboxSinkCallbacks callbacks_;
  const std::string name_;
  const std::vector<std::string> secrets_;
  OutboxSinkHost host_{};
  void* state_ = nullptr;
  bool usable_ = true;
  std::deque<Batch> started_;
  std::vector<Batch> spare_;  // finished batches, for their storage
  std::atomic<std::thread::id> caller_{};
  std::mutex breaches_mu_;
  std::set<std::string> breaches_;  // reported once each
  std::vector<std::string> new_breaches_;
};

}  // namespace

PluginHost::PluginHost(const OutboxSinkCallbacks* table, std::string_view name) : name_(name) {
  const std::string library = "outbox_sink_" + name_ + ".so";
  if (table == nullptr) throw ConfigError(library + " returned no sink table");
  if (table->magic != OUTBOX_SINK_MAGIC) {
    throw ConfigError(library + " is not an outbox sink (its table has the wrong magic number)");
  }
  if (table->abi_version != OUTBOX_SINK_ABI_VERSION) {
    throw ConfigError(library + " was built for sink interface version " +
                      std::to_string(table->abi_version) + ", this outbox has version " +
                      std::to_string(OUTBOX_SINK_ABI_VERSION) +
                      ": rebuild it against this outbox's outbox_sink.h");
  }
  if (table->size < kMinimumTableSize) {
    throw ConfigError(library + "'s sink table is too small (" + std::to_string(table->size) +
                      " bytes): set size = sizeof(OutboxSinkCallbacks)");
  }
  // Fields past the plugin's size do not exist in its table: they stay NULL here.
  std::memcpy(&callbacks_, table, std::min<std::size_t>(table->size, sizeof(callbacks_)));
  // The strides start() lays messages and outcomes out with (strided_array.hpp).
  struct Stride {
    const char* field;
    std::size_t size, minimum;
    const char* type;
  };
  for (const Stride& stride :
       {Stride{"message_size", callbacks_.message_size, kMinimumMessageSize, "OutboxSinkMessage"},
        Stride{"outcome_size", callbacks_.outcome_size, kMinimumOutcomeSize,
               "OutboxSinkOutcome"}}) {
    if (stride.size < stride.minimum || stride.size > kMaxStride ||
        stride.size % alignof(std::uint64_t) != 0) {
      throw ConfigError(library + "'s sink table gives " + stride.field + " = " +
                        std::to_string(stride.size) + ": set it to sizeof(" + stride.type + ")");
    }
  }
  if (callbacks_.name == nullptr || name_ != callbacks_.name) {
    throw ConfigError(library + " names its sink \"" +
                      (callbacks_.name != nullptr ? sink_text(callbacks_.name, 64) : "") +
                      "\", not \"" + name_ + "\"");
  }
  const char* missing = callbacks_.create == nullptr     ? "create"
                        : callbacks_.destroy == nullptr  ? "destroy"
                        : callbacks_.start == nullptr    ? "start"
                        : callbacks_.describe == nullptr ? "describe"
                                                         : nullptr;
  if (missing != nullptr) {
    throw ConfigError(library + " has no " + missing + " callback, which is required");
  }
  if (callbacks_.option_count > kMaxOptions ||
      (callbacks_.option_count > 0 && callbacks_.options == nullptr)) {
    throw ConfigError(library + " declares its options wrongly (options / option_count)");
  }
  std::set<std::string_view> seen;
  for (std::size_t i = 0; i < callbacks_.option_count; ++i) {
    const OutboxSinkOptionSpec& spec = callbacks_.options[i];
    if (!valid_option_name(spec.name) || !seen.insert(spec.name).second) {
      throw ConfigError(library + " declares option " + std::to_string(i) +
                        " with an invalid or repeated name");
    }
    if (spec.kind < OUTBOX_OPTION_TEXT || spec.kind > OUTBOX_OPTION_PRIVATE_FILE) {
      throw ConfigError(library + " declares option \"" + spec.name + "\" with the unknown kind " +
                        std::to_string(spec.kind));
    }
    specs_.push_back({spec.name, static_cast<OptionKind>(spec.kind),
                      spec.description != nullptr ? spec.description : ""});
  }
}

std::unique_ptr<Sink> PluginHost::create(const Options& resolved) const {
  auto sink = std::make_unique<HostedSink>(callbacks_, name_, secret_values(options(), resolved));
  sink->create(resolved);
  return sink;
}

}  // namespace outbox::sinks
