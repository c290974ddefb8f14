#include "sinks/common/plugin_export.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace outbox::sinks::plugin_export {
namespace {

// Copies `text` into a relay buffer, NUL-terminated, cut to its size.
void put(char* buffer, std::size_t size, std::string_view text) {
  if (buffer == nullptr || size == 0) return;
  const std::size_t n = std::min(text.size(), size - 1);
  std::memcpy(buffer, text.data(), n);
  buffer[n] = '\0';
}

std::string_view view(const OutboxSinkString& s) {
  return s.len == 0 ? std::string_view() : std::string_view(s.data, s.len);
}

// Forwards the C++ sink's waits to the relay's keep_waiting().
class HostObserver final : public WaitObserver {
 public:
  explicit HostObserver(const OutboxSinkHost* host) {
    if (host != nullptr) {
      std::memcpy(&host_, host, std::min<std::size_t>(host->size, sizeof(host_)));
    }
  }
  bool keep_waiting(std::string_view client_error) noexcept override {
    if (host_.keep_waiting == nullptr) return true;
    std::string error;
    try {
      error.assign(client_error);  // NUL-terminated for the C side
    } catch (...) {
      // out of memory: ask without the client's error
    }
    return host_.keep_waiting(host_.context, error.c_str()) != 0;
  }

 private:
  OutboxSinkHost host_{};
};

// A batch started on the C++ sink: its messages and outcomes stay in place until finish(),
// and its outcomes (their error texts) until the next start().
struct Slot {
  std::vector<Message> messages;
  std::vector<Outcome> outcomes;
  OutboxSinkOutcome* target = nullptr;
};

struct State {
  std::unique_ptr<Sink> sink;
  std::unique_ptr<HostObserver> observer;
  std::deque<Slot> started;
  std::vector<Slot> spare;  // finished slots, kept for their capacity
};

State* state_of(void* state) { return static_cast<State*>(state); }

// Runs f; an exception becomes a status and a message.
template <typename F>
int guarded(char* error, std::size_t error_size, F&& f) {
  try {
    f();
    return OUTBOX_SINK_OK;
  } catch (const ConfigError& e) {
    put(error, error_size, e.what());
    return OUTBOX_SINK_CONFIG_ERROR;
  } catch (const std::exception& e) {
    put(error, error_size, e.what());
    return OUTBOX_SINK_UNAVAILABLE;
  } catch (...) {
    put(error, error_size, "unknown exception in the sink");
    return OUTBOX_SINK_UNAVAILABLE;
  }
}

void copy_outcomes(const Slot& slot) {
  for (std::size_t i = 0; i < slot.outcomes.size(); ++i) {
    const Outcome& o = slot.outcomes[i];
    OutboxSinkOutcome& c = slot.target[i];
    switch (o.delivery) {
      case Delivery::kAcked:
        c.delivery = OUTBOX_DELIVERY_ACKED;
        break;
      case Delivery::kUnavailable:
        c.delivery = OUTBOX_DELIVERY_UNAVAILABLE;
        break;
      case Delivery::kRejected:
        c.delivery = OUTBOX_DELIVERY_REJECTED;
        break;
      case Delivery::kDeferred:
        c.delivery = OUTBOX_DELIVERY_DEFERRED;
        break;
    }
    // The text stays in the slot until the next start() reuses it: the relay copies it first.
    c.error = o.error.empty() ? nullptr : o.error.data();
    c.error_len = o.error.size();
  }
}

}  // namespace

int create(CreateFn create_fn, const OutboxSinkOption* options, std::size_t option_count,
           const OutboxSinkHost* host, void** state, char* error, std::size_t error_size) {
  return guarded(error, error_size, [&] {
    Options given;
    given.reserve(option_count);
    for (std::size_t i = 0; i < option_count; ++i) {
      given.emplace_back(options[i].name, options[i].value);
    }
    auto s = std::make_unique<State>();
    s->sink = create_fn(given);
    s->observer = std::make_unique<HostObserver>(host);
    s->sink->observe_waits(s->observer.get());
    *state = s.release();
  });
}

void destroy(void* state) { delete state_of(state); }

int start(void* state, const OutboxSinkMessage* messages, OutboxSinkOutcome* outcomes,
          std::size_t count, std::int64_t timeout_ms, char* error, std::size_t error_size) {
  State* s = state_of(state);
  return guarded(error, error_size, [&] {
    Slot slot;
    if (!s->spare.empty()) {
      slot = std::move(s->spare.back());
      s->spare.pop_back();
    }
    slot.messages.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      const OutboxSinkMessage& c = messages[i];
      Message& m = slot.messages[i];
      m.id = view(c.id);
      m.aggregatetype = view(c.aggregatetype);
      m.aggregateid = view(c.aggregateid);
      m.type = view(c.type);
      m.payload = view(c.payload);
      m.headers.clear();
      for (std::size_t h = 0; h < c.header_count; ++h) {
        m.headers.emplace_back(view(c.headers[h].name), view(c.headers[h].value));
      }
      m.created_at_unix_us = c.created_at_unix_us;
    }
    slot.outcomes.assign(count, Outcome{});
    slot.target = outcomes;
    // The slot's vectors must not move while the sink holds the batch: it goes into the deque
    // first, and the deque keeps its elements in place.
    Slot& placed = s->started.emplace_back(std::move(slot));
    try {
      s->sink->start(placed.messages, placed.outcomes, std::chrono::milliseconds(timeout_ms));
    } catch (...) {
      s->started.pop_back();
      throw;
    }
  });
}

int finish(void* state, char* error, std::size_t error_size) {
  State* s = state_of(state);
  if (s->started.empty()) return OUTBOX_SINK_OK;
  const int status = guarded(error, error_size, [&] { s->sink->finish(); });
  Slot& slot = s->started.front();
  if (status == OUTBOX_SINK_OK) copy_outcomes(slot);
  s->spare.push_back(std::move(slot));
  s->started.pop_front();
  return status;
}

void describe(void* state, char* buffer, std::size_t size) {
  try {
    put(buffer, size, state_of(state)->sink->describe());
  } catch (...) {
    put(buffer, size, "(no description)");
  }
}

int usable(void* state) {
  try {
    return state_of(state)->sink->usable() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

std::uint64_t max_message_bytes(void* state) {
  try {
    return state_of(state)->sink->max_message_bytes();
  } catch (...) {
    return 0;
  }
}

void take_log(void* state, OutboxSinkLogFn emit, void* emit_context) {
  std::vector<LogLine> lines;
  try {
    lines = state_of(state)->sink->take_log();
  } catch (...) {
    return;  // out of memory: the lines are lost
  }
  for (const LogLine& line : lines) emit(emit_context, line.level, line.text.c_str());
}

std::vector<OutboxSinkOptionSpec> option_table(const OptionSpec* specs, std::size_t count) {
  std::vector<OutboxSinkOptionSpec> table;
  table.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    table.push_back(
        {specs[i].name, static_cast<std::int32_t>(specs[i].kind), specs[i].description});
  }
  return table;
}

}  // namespace outbox::sinks::plugin_export
