// The HTTP sink's started batch (http_sink.hpp): per-key chains of its messages, and what is
// settled. Private to http_sink.cpp and http_stragglers.cpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sinks/common/failed_keys.hpp"
#include "sinks/http/http_sink.hpp"

namespace outbox::sinks {

struct HttpSink::Batch {
  std::uint64_t seq = 0;
  const std::vector<Message>* messages = nullptr;
  std::vector<Outcome>* outcomes = nullptr;
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds timeout{0};
  std::vector<std::size_t> next;  // the next message of its key in the batch, or kNoNext
  std::vector<char> settled;
  std::size_t unsettled = 0;
  std::size_t acked = 0;
  std::deque<std::size_t> ready;  // may start: every earlier message of its key is acked
  // Each key's last message here: where a later batch's first of the key waits.
  std::map<std::pair<std::string_view, std::string_view>, std::size_t> last;
  // Last message of a key -> (later batch, its first message of the key) waiting for it.
  std::map<std::size_t, std::pair<std::uint64_t, std::size_t>> handoff;
  FailedKeys failed;  // keys not delivered here, with what their later messages are told
  std::string stop;   // set: no new request of this batch starts; the error of those
};

inline constexpr std::size_t kNoNext = static_cast<std::size_t>(-1);  // no next message

}  // namespace outbox::sinks
