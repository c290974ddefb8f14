// The sequence values the delivery log records at or above the low-water mark, as sorted
// intervals: what a scan that starts again from the mark passes over instead of sending it
// twice. Exact, never merged beyond what it holds (a value it held by mistake would be an
// event never sent).
//
// Plain C++, unit-tested without a server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace outbox {

class SeqSet {
 public:
  struct Interval {
    int64_t lo;
    int64_t hi;  // inclusive
  };
  // Replaces the set by the union of `runs` (any order; they may overlap or touch).
  void assign(std::vector<Interval> runs);
  // Appends the runs of consecutive values in `values` (ascending) to `runs`.
  static void append_runs(const int64_t* values, int n, std::vector<Interval>& runs);
  bool contains(int64_t value) const noexcept;
  // Forgets every value below `floor`.
  void drop_below(int64_t floor);
  void clear() { intervals_.clear(); }
  bool empty() const { return intervals_.empty(); }
  std::size_t interval_count() const { return intervals_.size(); }

 private:
  std::vector<Interval> intervals_;  // sorted, disjoint, not adjacent
};

}  // namespace outbox
