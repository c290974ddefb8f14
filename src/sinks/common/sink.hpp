// The C++ side of a sink: the class the relay drives and the built-in sinks implement. Plain
// C++; this header includes no PostgreSQL header, so sinks are unit-tested and run under
// sanitizers without a server.
//
// Between the relay and a sink library there is only the C interface of
// src/include/outbox_sink.h (installed for third-party sinks): the relay wraps a plugin's C
// callbacks in a Sink (sinks/host/plugin_host.hpp), and a built-in sink exports its Sink through
// them (sinks/common/plugin_export.hpp). C++ never crosses a library boundary, so a sink may be
// built with any compiler and standard library. The rules (threads, memory, failures, order) are
// written in outbox_sink.h; this class states them in C++ terms.
//
// Options: a sink declares every option it accepts, each with a kind. configure_sink and the
// relay refuse any other option, check the kinds and resolve files and secrets
// (src/sinks/common/option_rules.hpp) before create() sees them; a built-in sink's create() refuses
// undeclared options again, from the same declaration. The reference is docs/sink-options.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "include/outbox_sink.h"

namespace outbox::sinks {

// One event as the relay hands it over. The views stay valid until send() returns, or until
// finish() returns for the batch that start() was given, or until the sink is destroyed
// (whichever comes first).
struct Message {
  std::string_view id;             // the event id (UUID text): stable across retries and replays
  std::string_view aggregatetype;  // routes to a topic / subject
  std::string_view aggregateid;    // the message key: order is kept per key
  std::string_view type;           // the event type, sent as a header
  std::string_view payload;        // JSON text
  std::vector<std::pair<std::string_view, std::string_view>> headers;  // the event's own
  std::int64_t created_at_unix_us = 0;
};

// A log line of a sink's client library; level as in syslog (0 emergency .. 7 debug).
struct LogLine {
  int level = 6;
  std::string text;
};

enum class Delivery {
  kAcked,        // the broker has it; the relay marks the event published
  kUnavailable,  // sink-wide trouble (broker down, timeout): retry later, no attempt burned
  kRejected,     // this message was refused (too large, invalid): counts as an attempt
  // Not sent, because an earlier message of its key (aggregatetype, aggregateid) in this
  // batch or in an earlier batch still started was not acknowledged. No attempt is counted;
  // the relay sends it after that one (ordered mode) or again later.
  kDeferred,
};

struct Outcome {
  Delivery delivery = Delivery::kUnavailable;
  std::string error;  // empty when acked; never contains credentials
};

// Options as set with outbox.configure_sink(): a flat JSON object, values as text.
using Options = std::vector<std::pair<std::string, std::string>>;

// From create(): bad options. From send(), start() or finish(): the broker's setup is wrong for
// the whole batch (a subject no stream captures, say). No attempt is counted; the relay reports
// it and tries again after outbox.retry_backoff_max.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What an option's value is (OutboxSinkOptionKind); configure_sink checks it before create().
enum class OptionKind : std::int32_t {
  kText = OUTBOX_OPTION_TEXT,        // passed as given
  kInteger = OUTBOX_OPTION_INTEGER,  // a whole number, optionally negative
  kBoolean = OUTBOX_OPTION_BOOLEAN,  // true or false
  // A file inside outbox.sink_files_directory, given relative to it (or absolute, inside it);
  // it must resolve (symbolic links followed) to a regular file there, not writable by every
  // user, through directories that only the server's user or root may write. The sink
  // receives the absolute resolved path.
  kFile = OUTBOX_OPTION_FILE,
  // Never given inline: the user gives <name>_file, a file inside that directory that is not
  // readable or writable by others (mode & 007 == 0), at most 64 KiB. The sink receives
  // <name> = its content, one trailing newline stripped. Never shown, logged or echoed.
  kSecret = OUTBOX_OPTION_SECRET,
  // A kFile holding key material (a private key, a credentials file): it must also not be
  // readable or writable by others (mode & 007 == 0). The sink receives its path.
  kPrivateFile = OUTBOX_OPTION_PRIVATE_FILE,
};

struct OptionSpec {
  const char* name;
  OptionKind kind;
  const char* description;  // one line, as in docs/sink-options.md
};

// Implemented by the relay: lets it see the client library's trouble while a sink waits for
// acknowledgements, and end the wait (at shutdown, or when the configuration changes).
class WaitObserver {
 public:
  virtual ~WaitObserver() = default;
  // Called on the thread that called finish()/send(), at least every 100 ms while it waits,
  // with the client library's latest error ("" when none). Returns false to stop waiting at
  // once. Must not call back into the sink; noexcept. A sink calls it holding none of its own
  // locks, so the observer may take its own.
  virtual bool keep_waiting(std::string_view client_error) noexcept = 0;
};

class Sink {
 public:
  virtual ~Sink() = default;

  // Hands a batch over: the relay fetches and marks the next batch while the broker
  // acknowledges this one. start() may return without waiting; finish() waits for the oldest
  // started batch that has not finished, at most until its start() + `timeout`, and sets all
  // of its outcomes: outcomes[i] for messages[i] (outcomes is sized by the caller).
  // Per-message failures go into outcomes. An exception from start() means the batch was not
  // started and failed as kUnavailable; from finish(), that the oldest batch failed as
  // kUnavailable. A sink that sends synchronously sets the outcomes in start() and keeps the
  // default finish().
  //
  // The relay keeps at most two batches started; `messages` and `outcomes` stay where they
  // are until that batch's finish() returns or the sink is destroyed: a sink may read and
  // write them on its own thread.
  //
  // Per-key order: the key is (aggregatetype, aggregateid). Messages with the same key are
  // delivered in the order given. Once a message is known not to be delivered (rejected, or
  // unavailable), no later message of its key in the batch, or in a batch started after it
  // while it is unfinished, may be delivered: the sink reports those kDeferred (or
  // kUnavailable) instead. A message that fails after it was handed to the broker (a
  // broker-side rejection) cannot hold back the ones already on their way; a sink documents
  // whether that can happen.
  virtual void start(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
                     std::chrono::milliseconds timeout) = 0;
  virtual void finish() {}

  // One batch, synchronously (tests and tools; the relay pipelines): start() and finish(),
  // while no other batch is started (finish() would wait for that one instead).
  void send(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
            std::chrono::milliseconds timeout) {
    start(messages, outcomes, timeout);
    finish();
  }

  // False once the sink cannot recover by itself (e.g. a librdkafka fatal error): the relay
  // then destroys it and creates a new one after a back-off.
  virtual bool usable() const { return true; }

  // One line for logs and outbox.status: what it sends to, never credentials.
  virtual std::string describe() const = 0;

  // The client library's log lines since the last call, oldest first (a sink collects them
  // on any thread). The relay takes them after every pass and writes them to the server log,
  // where they follow log_destination; a sink must not write to stderr. Default: none.
  virtual std::vector<LogLine> take_log() { return {}; }

  // The largest message (payload + key + headers, in bytes) the sink can deliver; 0 = no
  // limit. configure_sink warns when it is below what outbox.enqueue accepts.
  virtual std::size_t max_message_bytes() const { return 0; }

  // The relay's observer of waits (nullptr: wait until the deadline). A sink that waits for
  // acknowledgements calls keep_waiting() at least every 100 ms while it waits, and once it
  // returns false stops waiting: what is not acknowledged by then fails as kUnavailable with
  // the error "not acknowledged: the relay stopped waiting" (plus the client error, if any).
  // The relay sends it again later. The observer must outlive the sink or be replaced first.
  void observe_waits(WaitObserver* observer) { observer_ = observer; }

 protected:
  // The observer's answer; true without an observer. Call it holding none of the sink's locks.
  bool keep_waiting(std::string_view client_error) const {
    return observer_ == nullptr || observer_->keep_waiting(client_error);
  }

 private:
  WaitObserver* observer_ = nullptr;
};

// Creates a sink from resolved options (see OptionKind); throws ConfigError for bad options,
// std::exception otherwise. A built-in sink exports one with OUTBOX_EXPORT_SINK.
using CreateFn = std::unique_ptr<Sink> (*)(const Options& options);

}  // namespace outbox::sinks
