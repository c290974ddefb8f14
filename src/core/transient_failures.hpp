// Consecutive transient failures per key: a message that was unavailable while others of its
// batch were acknowledged holds its key and is retried on a schedule of its own, which backs
// off with the number of times in a row its key failed so. Plain C++.
//
// Kept in the relay's memory only: after a restart, or on another worker, a key's count starts
// again from 1, which only shortens its next wait. No attempt is counted for these failures.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

namespace outbox {

class TransientFailures {
 public:
  // At most this many keys are remembered; past it the counts start again.
  static constexpr std::size_t kMaxKeys = 100000;

  // One failure more for the key; returns how many in a row, this one included.
  int failed(std::string_view aggregatetype, std::string_view aggregateid);
  // The key delivered an event: its count starts again.
  void delivered(std::string_view aggregatetype, std::string_view aggregateid);
  bool empty() const { return counts_.empty(); }
  std::size_t size() const { return counts_.size(); }

 private:
  std::unordered_map<std::string, int> counts_;
};

}  // namespace outbox
