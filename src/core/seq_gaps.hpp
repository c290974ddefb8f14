// The relay's gaps: sequence values below its resume point that none of its fetches
// returned. Each is an event that had not committed yet when the relay passed it, one that
// never will exist (its transaction aborted), or one that another worker held. Everything
// else below the resume point the relay has resolved itself, so finding late commits means
// probing the gaps, not walking again over what was just published.
//
// Plain C++, unit-tested without a server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace outbox {

class SeqGaps {
 public:
  struct Interval {
    int64_t lo;
    int64_t hi;  // inclusive
  };

  // Beyond max_intervals the two closest intervals merge: a gap may then also cover values
  // that were resolved, which costs only a wider probe (the probe skips resolved events).
  explicit SeqGaps(std::size_t max_intervals);

  // Adds [lo, hi] (nothing if lo > hi), joining the intervals it touches or overlaps.
  void add(int64_t lo, int64_t hi);
  // Takes one value out (it was resolved), splitting its interval.
  void remove(int64_t value);
  // Replaces what lies at or below `upto` by `kept` (sorted, disjoint; above upto ignored): after
  // a probe has shown which of those values can still hold an event.
  void replace_up_to(int64_t upto, const std::vector<Interval>& kept);
  void clear() { intervals_.clear(); }

  bool empty() const { return intervals_.empty(); }
  // How many values the gaps hold.
  int64_t width() const;
  int64_t first() const { return intervals_.front().lo; }
  const std::vector<Interval>& intervals() const { return intervals_; }

 private:
  void fit();
  std::size_t max_intervals_;
  std::vector<Interval> intervals_;  // sorted, disjoint, not adjacent
};

}  // namespace outbox
