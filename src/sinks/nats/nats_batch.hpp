// A batch the NATS sink has started (nats_sink.hpp): where its outcomes go and what it still
// waits for. Written by start(), the PubAck handler and finish(), under the sink's lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sinks/common/failed_keys.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::sinks::nats {

struct Batch {
  const std::vector<Message>* messages = nullptr;  // valid until the batch's finish()
  std::vector<Outcome>* outcomes = nullptr;
  std::vector<char> waiting;  // 1 while message i has no outcome
  std::size_t pending = 0;
  std::uint64_t first_seq = 0;  // message i is first_seq + i in the sink's in-flight map
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds timeout{0};
  bool abandoned = false;  // the observer ended the wait while start() published
  // cnats' reconnect count when it published: its messages went over that connection.
  std::uint64_t connection = 0;
  // Keys failed before cnats had them, or whose message the lost connection took with it:
  // later messages of the batch and later batches defer them.
  FailedKeys failed;
  std::string config_error;  // not the expected stream, for finish() to throw
  // Answered "no responders" (message, subject): finish() looks up the subjects' streams.
  std::vector<std::pair<std::size_t, std::string>> no_responders;

  // Settles message i unless it has an outcome.
  void settle(std::size_t i, Outcome outcome) {
    if (i >= waiting.size() || !waiting[i]) return;
    waiting[i] = 0;
    --pending;
    (*outcomes)[i] = std::move(outcome);
  }
};

}  // namespace outbox::sinks::nats
