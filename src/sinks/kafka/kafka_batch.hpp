// A batch the Kafka sink has started and not finished (kafka_sink.hpp): its messages'
// outcomes as the delivery reports bring them, and the keys that hold later messages back.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sinks/common/failed_keys.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::sinks {

// Message i carries the sequence number first_seq + i as its delivery report's opaque.
struct KafkaBatch {
  using Clock = std::chrono::steady_clock;

  std::uint64_t first_seq = 0;
  const std::vector<Message>* messages = nullptr;
  std::vector<Outcome>* outcomes = nullptr;
  std::vector<char> waiting;  // 1 while message i has no outcome yet
  std::size_t pending = 0;    // how many are waiting
  std::size_t acked = 0;
  Clock::time_point progress_at;  // when it was queued, or a message last got its outcome
  Clock::time_point deadline;
  std::chrono::milliseconds timeout{0};
  bool queued = false;  // the sink's thread is done with its messages
  // Keys of its messages not delivered (rejected or deferred before they were queued, refused
  // for a partition without a leader, stragglers): later messages of these keys are not
  // queued but kDeferred, with the first one's error.
  FailedKeys rejected_keys;
  // The same, of the batches that were unfinished when this one was started.
  FailedKeys earlier_keys;

  // Gives message i its outcome, unless it has one; it no longer waits.
  void settle(std::size_t i, Outcome outcome);
  // Settles message i kRejected before it is queued; its key holds back later messages.
  void reject(std::size_t i, const Message& message, std::string error);
  // Every message still waiting: kUnavailable with `error`.
  void fail_pending(const std::string& error);
};

}  // namespace outbox::sinks
