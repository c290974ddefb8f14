// outbox_sink_crashtest.so: a C sink that acknowledges everything (a message whose payload is
// "reject" is rejected), and, when told by an option, crashes or hangs: the sink process's
// tests (process_sink_test.cpp) and the TAP test of outbox.sink_isolation use it. Built without
// sanitizers: it is loaded by outbox_sink_host, a plain program.
//
// Options: crash_in (create, start or finish), crash_signal (11: SIGSEGV, 6: abort(); default
// 11), hang_in (start or finish: loops for ever), wait_ms (finish waits that long, calling
// keep_waiting with the client error "broker down" every 10 ms).
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <string>

#include "include/outbox_sink.h"

namespace {

struct State {
  std::string crash_in;
  int crash_signal = SIGSEGV;
  std::string hang_in;
  long wait_ms = 0;
  const OutboxSinkHost* host = nullptr;
  struct Batch {
    const OutboxSinkMessage* messages;
    OutboxSinkOutcome* outcomes;
    size_t count;
  };
  std::deque<Batch> started;
  std::deque<std::string> errors;  // the last finished batch's error texts
};

void maybe_fail(const State& s, const char* where) {
  if (s.crash_in == where) {
    if (s.crash_signal == SIGABRT) abort();
    raise(s.crash_signal);
  }
  if (s.hang_in == where) {
    for (volatile bool forever = true; forever;) {
    }
  }
}

int create(const OutboxSinkOption* options, size_t count, const OutboxSinkHost* host, void** state,
           char* error, size_t error_size) {
  auto* s = new State;
  s->host = host;
  for (size_t i = 0; i < count; ++i) {
    const std::string name = options[i].name;
    if (name == "crash_in") s->crash_in = options[i].value;
    if (name == "crash_signal") s->crash_signal = atoi(options[i].value);
    if (name == "hang_in") s->hang_in = options[i].value;
    if (name == "wait_ms") s->wait_ms = atol(options[i].value);
    if (name == "refuse") {
      std::snprintf(error, error_size, "refused: %s", options[i].value);
      delete s;
      return OUTBOX_SINK_CONFIG_ERROR;
    }
  }
  maybe_fail(*s, "create");
  *state = s;
  return OUTBOX_SINK_OK;
}

void destroy(void* state) { delete static_cast<State*>(state); }

int start(void* state, const OutboxSinkMessage* messages, OutboxSinkOutcome* outcomes, size_t count,
          int64_t, char*, size_t) {
  auto* s = static_cast<State*>(state);
  maybe_fail(*s, "start");
  s->started.push_back({messages, outcomes, count});
  return OUTBOX_SINK_OK;
}

int finish(void* state, char*, size_t) {
  auto* s = static_cast<State*>(state);
  maybe_fail(*s, "finish");
  State::Batch batch = s->started.front();
  s->started.pop_front();
  s->errors.clear();  // the relay copied the previous batch's
  bool stopped = false;
  for (long waited = 0; waited < s->wait_ms && !stopped; waited += 10) {
    stopped = s->host->keep_waiting(s->host->context, "broker down") == 0;
    if (!stopped) usleep(10 * 1000);
  }
  for (size_t i = 0; i < batch.count; ++i) {
    const OutboxSinkMessage& m = batch.messages[i];
    OutboxSinkOutcome& o = batch.outcomes[i];
    if (stopped) {
      o.delivery = OUTBOX_DELIVERY_UNAVAILABLE;
      o.error = "not acknowledged: the relay stopped waiting";
      o.error_len = std::strlen(o.error);
    } else if (m.payload.len == 6 && std::memcmp(m.payload.data, "reject", 6) == 0) {
      o.delivery = OUTBOX_DELIVERY_REJECTED;
      const std::string& text =
          s->errors.emplace_back("rejected " + std::string(m.id.data, m.id.len));
      o.error = text.data();
      o.error_len = text.size();
    } else {
      o.delivery = OUTBOX_DELIVERY_ACKED;
    }
  }
  return OUTBOX_SINK_OK;
}

void describe(void*, char* buffer, size_t size) { std::snprintf(buffer, size, "crashtest"); }

uint64_t max_message_bytes(void*) { return 12345; }

void take_log(void*, OutboxSinkLogFn emit, void* context) { emit(context, 6, "crashtest log"); }

const OutboxSinkOptionSpec kOptions[] = {
    {"crash_in", OUTBOX_OPTION_TEXT, "create, start or finish: crash there"},
    {"crash_signal", OUTBOX_OPTION_INTEGER, "11 (SIGSEGV) or 6 (abort)"},
    {"hang_in", OUTBOX_OPTION_TEXT, "start or finish: loop for ever there"},
    {"wait_ms", OUTBOX_OPTION_INTEGER, "how long finish waits, observed"},
    {"refuse", OUTBOX_OPTION_TEXT, "create refuses the options"},
};

const OutboxSinkCallbacks kTable = {
    OUTBOX_SINK_MAGIC,
    OUTBOX_SINK_ABI_VERSION,
    sizeof(OutboxSinkCallbacks),
    sizeof(OutboxSinkMessage),
    sizeof(OutboxSinkOutcome),
    "crashtest",
    kOptions,
    sizeof(kOptions) / sizeof(kOptions[0]),
    &create,
    &destroy,
    &start,
    &describe,
    &finish,
    nullptr,
    &max_message_bytes,
    &take_log,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const OutboxSinkCallbacks* outbox_sink_init(
    void) {
  return &kTable;
}
