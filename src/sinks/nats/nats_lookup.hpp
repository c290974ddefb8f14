// The NATS sink's stream lookup: asks JetStream which stream captures a subject, to tell a
// missing stream from a server that cannot answer yet. A publish answered "no responders"
// means either; only the lookup's answer "no stream" is a configuration error.
//
// The request goes to $JS.API.STREAM.NAMES with {"subject": "<subject>"} on the sink's own
// connection, through a synchronous subscription on a fresh inbox (no thread is started),
// polled in slices of at most 100 ms so that the caller can ask its WaitObserver in between.
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <functional>
#include <string>

namespace outbox::sinks::nats {

enum class StreamLookup {
  kFound,    // a stream captures the subject: JetStream answers, so this is unavailability
  kMissing,  // JetStream answered, and no stream captures the subject
  kUnknown,  // no answer: not connected, no responders, timed out, an API error, stopped
};

struct StreamLookupResult {
  StreamLookup state = StreamLookup::kUnknown;
  std::string detail;  // why, for the error text ("" for kMissing)
};

// Asks until `deadline`; calls keep_waiting() at least every 100 ms and gives up (kUnknown)
// once it returns false or the connection is not up. Call it holding none of the sink's locks.
StreamLookupResult find_stream(natsConnection* nc, const std::string& subject,
                               std::chrono::steady_clock::time_point deadline,
                               const std::function<bool()>& keep_waiting);

// The answer to a $JS.API.STREAM.NAMES request, read (kUnknown for an error answer or one
// that cannot be read). Exposed for the unit tests.
StreamLookupResult read_stream_names(const std::string& answer);

}  // namespace outbox::sinks::nats
